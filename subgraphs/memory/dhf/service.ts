// DHF compositor (:7073): POST /v1/reconstruct {stackId, sleeveId, depth} -> {ok, fragments, broken, fidelity}.
import type { FastifyInstance } from 'fastify';
import { createHttp, listen } from '../../../lib/http.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { dhfReconstruct } from './reconstruct.ts';

const id = { type: 'string', minLength: 1, maxLength: 300 };
const body = { type: 'object', required: ['stackId', 'sleeveId', 'depth'], properties: { stackId: id, sleeveId: id, depth: { type: 'integer' } } };

export async function dhfRoutes(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get('/health', async () => ({ ok: true, name: 'dhf', ts: Date.now() }));
  app.post('/v1/reconstruct', { schema: { body } }, async (req) => dhfReconstruct(p, req.body as { stackId: string; sleeveId: string; depth: number }));
}

export const startDhf: ServiceStarter = async (p) => {
  const app = createHttp({ name: 'dhf', log: p.log, internalToken: p.config.internalToken });
  await app.register(dhfRoutes, { platform: p });
  const port = await listen(app, 'dhf', p.config.host, p.config.ports.dhf);
  return { name: 'dhf', url: `http://127.0.0.1:${port}`, close: () => app.close() };
};
