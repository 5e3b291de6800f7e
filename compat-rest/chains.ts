// Gateway routes of the chains context: the epoch and manual mining, both answered by Medulla.
import type { FastifyInstance } from 'fastify';
import { unavailable } from '../lib/errors.ts';
import type { Platform } from '../lib/platform.ts';
import { getInfo, mineBlock } from '../subgraphs/chains/medulla/client.ts';

export default async function chainsRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get('/v1/epochs/current', async () => {
    try {
      const { epoch, height, tip } = await getInfo(p.config.urls.medulla, { timeoutMs: 2000 });
      return { epoch, height, tip };
    } catch {
      // Medulla unreachable: the last epoch announced on the bus.
      return p.epochs.info();
    }
  });
  app.post('/v1/mining/block', async () => {
    try {
      return await mineBlock(p.config.urls.medulla);
    } catch (e) {
      throw unavailable(`Medulla could not mine a block: ${(e as Error).message}`, 2);
    }
  });
}
