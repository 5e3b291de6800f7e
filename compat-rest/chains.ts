// Gateway routes of the chains context: the epoch and manual mining, both answered by Medulla.
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { currentEpochInfo, mineBlockNow } from '../subgraphs/chains/index.ts';

export default async function chainsRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get('/v1/epochs/current', async () => {
    const { epoch, height, tip } = await currentEpochInfo(p);
    return { epoch, height, tip };
  });
  app.post('/v1/mining/block', () => mineBlockNow(p));
}
