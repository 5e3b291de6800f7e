// DHF compositor (:7073): POST /v1/reconstruct {stackId, sleeveId, depth} -> {ok, fragments, broken, fidelity}.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { dhfReconstruct } from './reconstruct.ts';

const id = Type.String({ minLength: 1, maxLength: 300 });
const body = Type.Object({ stackId: id, sleeveId: id, depth: Type.Integer() });

export async function dhfRoutes(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/health', async () => ({ ok: true, name: 'dhf', ts: Date.now() }));
  app.post('/v1/reconstruct', { schema: { body } }, async (req) => dhfReconstruct(p, req.body));
}

export const startDhf: ServiceStarter = async (p) => {
  const app = createHttp({ name: 'dhf', log: p.log, internalToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'dhf', needs: ['database'] });
  await app.register(dhfRoutes, { platform: p });
  const port = await listen(app, 'dhf', p.config.host, p.config.ports.dhf);
  return { name: 'dhf', url: `http://127.0.0.1:${port}`, close: () => app.close() };
};
