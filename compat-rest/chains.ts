// Gateway routes of the chains context: the epoch and manual mining, both answered by Medulla.
import type { FastifyInstance } from 'fastify';
import { unavailable } from '../lib/errors.ts';
import type { Platform } from '../lib/platform.ts';
import { medullaRpc, type ChainInfo } from '../subgraphs/chains/medulla/client.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';

export default async function chainsRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get('/v1/epochs/current', async () => {
    try {
      // Medulla is internal: send the internal token when one is set.
      const { epoch, height, tip } = await medullaRpc<ChainInfo>(p.config.urls.medulla, 'getinfo', [], { timeoutMs: 2000, token: p.config.internalToken });
      return { epoch, height, tip };
    } catch {
      // Medulla unreachable: the last epoch announced on the bus.
      return p.epochs.info();
    }
  });
  app.post('/v1/mining/block', async () => {
    try {
      return await medullaRpc<Block>(p.config.urls.medulla, 'mineblock', [], { timeoutMs: 120_000, token: p.config.internalToken });
    } catch (e) {
      throw unavailable(`Medulla could not mine a block: ${(e as Error).message}`, 2);
    }
  });
}
