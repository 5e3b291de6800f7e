// The Needlecast Router (:7071). On start it finishes or compensates every saga left in flight.
//   POST /needlecast {from, to, sagaId?, toTickRate?, stackId?, shape?} -> {ok, sagaId, route: [step names], shards: [cids], ...}
//   GET  /needlecast/:sagaId -> the saga's state
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { getSaga, recoverSagas, runNeedlecast, type SagaOptions } from './saga.ts';

const idSchema = Type.String({ minLength: 1, maxLength: 256 });

export const routerBodySchema = Type.Object({
  from: idSchema,
  to: idSchema,
  sagaId: Type.Optional(idSchema),
  stackId: Type.Optional(idSchema),
  toTickRate: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400_000 })),
  shape: Type.Optional(Type.Unsafe<'A' | 'B'>({ type: 'string', enum: ['A', 'B'] })),
});

export async function needlecastRoutes(fastify: FastifyInstance, opts: { platform: Platform; saga?: SagaOptions }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/needlecast', { schema: { body: routerBodySchema } }, async (req) => runNeedlecast(p, req.body, opts.saga));
  app.get('/needlecast/:sagaId', { schema: { params: Type.Object({ sagaId: idSchema }) } }, async (req) => getSaga(p, req.params.sagaId));
}

/** `saga` comes from the composition root (bin/services.ts); the fault suites inject failAt/afterStep there. */
export function needlecastStarter(saga: SagaOptions = {}): ServiceStarter {
  return async (p) => {
    const options: SagaOptions = { ...saga };
    // Recovery runs without the crash injection: a crashed saga is finished by the next router.
    const recovered = await recoverSagas(p, { ...options, afterStep: undefined });
    if (recovered.completed.length || recovered.compensated.length) p.log.info(recovered, 'needlecast: recovered sagas');
    const app = createHttp({ name: 'needlecast', log: p.log, internalToken: p.config.internalToken });
    mountReadiness(app, p, { name: 'needlecast' });
    app.get('/health', async () => ({ ok: true, name: 'needlecast', ts: Date.now() }));
    await app.register(needlecastRoutes, { platform: p, saga: options });
    const port = await listen(app, 'needlecast', p.config.host, p.config.ports.needlecast);
    return { name: 'needlecast', url: `http://127.0.0.1:${port}`, close: () => app.close() };
  };
}

export const startNeedlecast: ServiceStarter = needlecastStarter();
