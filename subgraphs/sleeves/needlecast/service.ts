// The Needlecast Router (:7071). On start it finishes or compensates every saga left in flight.
//   POST /needlecast {from, to, sagaId?, toTickRate?, stackId?, shape?} -> {ok, sagaId, route: [step names], shards: [cids], ...}
//   GET  /needlecast/:sagaId -> the saga's state
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { getSaga, recoverSagas, runNeedlecast, type SagaOptions } from './saga.ts';
import { STEP_NAMES, type StepName } from './steps.ts';

const idSchema = Type.String({ minLength: 1, maxLength: 256 });

export const routerBodySchema = Type.Object({
  from: idSchema, to: idSchema, sagaId: Type.Optional(idSchema), stackId: Type.Optional(idSchema),
  toTickRate: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400_000 })),
  shape: Type.Optional(Type.Unsafe<'A' | 'B'>({ type: 'string', enum: ['A', 'B'] })),
});

export async function needlecastRoutes(fastify: FastifyInstance, opts: { platform: Platform; saga?: SagaOptions }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/needlecast', { schema: { body: routerBodySchema } }, async (req) => runNeedlecast(p, req.body, opts.saga));
  app.get('/needlecast/:sagaId', { schema: { params: Type.Object({ sagaId: idSchema }) } }, async (req) => getSaga(p, req.params.sagaId));
}

/** COG_NEEDLECAST_FAIL_AT=<step>: failure injection, for tests only. */
function failAtFromEnv(): StepName | undefined {
  const v = process.env.COG_NEEDLECAST_FAIL_AT;
  if (!v) return undefined;
  if (!(STEP_NAMES as readonly string[]).includes(v)) throw new Error(`COG_NEEDLECAST_FAIL_AT: must be one of ${STEP_NAMES.join(', ')}, got "${v}"`);
  return v as StepName;
}

/**
 * COG_NEEDLECAST_CRASH_AFTER=<step>[,<step>...]: fault injection, for tests only. The router kills
 * itself (SIGKILL) right after the step is persisted, once per step and data dir (a marker file
 * under $COG_DATA_DIR/faults/ remembers it), so the restarted router recovers the saga (recovery
 * itself never crashes).
 */
function crashAfterFromEnv(dataDir: string): SagaOptions['afterStep'] {
  const v = process.env.COG_NEEDLECAST_CRASH_AFTER;
  if (!v) return undefined;
  const steps = v.split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of steps) if (!(STEP_NAMES as readonly string[]).includes(s)) throw new Error(`COG_NEEDLECAST_CRASH_AFTER: each must be one of ${STEP_NAMES.join(', ')}, got "${s}"`);
  const dir = path.join(dataDir, 'faults');
  return (step) => {
    if (!steps.includes(step)) return;
    const marker = path.join(dir, `needlecast-crash-${step}`);
    if (fs.existsSync(marker)) return;
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(marker, String(Date.now()));
    process.kill(process.pid, 'SIGKILL');
  };
}

export function needlecastStarter(saga: SagaOptions = {}): ServiceStarter {
  return async (p) => {
    const options: SagaOptions = { failAt: failAtFromEnv(), afterStep: crashAfterFromEnv(p.config.dataDir), ...saga };
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
