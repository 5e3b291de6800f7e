// Readiness: GET /readyz checks what a service depends on (database, bus, cache, Medulla's tip,
// Cortex) and answers 200 with each check's state, or 503 problem+json naming what is down.
// /healthz and /health stay liveness (the process answers). A soft dependency (the gateway's cache:
// its rate limit degrades open) is reported as degraded without failing readiness. Each check is
// bounded by CHECK_TIMEOUT_MS and the answer is reused for CACHE_MS, so probes stay cheap.
import type { FastifyInstance } from 'fastify';
import type { Platform } from './platform.ts';
import { Problem } from './errors.ts';
import { opsGuard, sendProblem } from './http.ts';
import { jsonRpc } from './json-rpc.ts';

const CHECK_TIMEOUT_MS = 1500;
const CACHE_MS = 1000;

export type Dependency = 'database' | 'bus' | 'cache' | 'medulla' | 'cortex';

export interface ReadinessOptions {
  /** The service's name in the answer. */
  name: string;
  /** What it needs; the default is database and bus. */
  needs?: Dependency[];
  /** Needed, but the service works without it (reported, never a 503). */
  soft?: Dependency[];
  /** A public service (gateway, faucet): the ops guard applies (lib/http.ts opsGuard). */
  public?: boolean;
}

type State = 'up' | 'down' | 'degraded';

function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    work.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms))),
  ]);
}

/** Cortex is any Ethereum JSON-RPC node: it is up when it answers eth_chainId. */
async function cortexAnswers(url: string): Promise<void> {
  if (!(await jsonRpc<string>(url, 'eth_chainId', [], CHECK_TIMEOUT_MS))) throw new Error('no chain id');
}

/** Registers GET /readyz on `app` for the dependencies of one service. */
export function mountReadiness(app: FastifyInstance, p: Platform, opts: ReadinessOptions): void {
  const needs = opts.needs ?? ['database', 'bus'];
  const soft = new Set(opts.soft ?? []);
  // The tip's age as this service sees it: Medulla stalled (or the bus carrying its events lost)
  // shows as no advance for COG_READY_TIP_AGE_MS.
  let tipSeenAt = Date.now();
  const stop = p.epochs.onAdvance(() => void (tipSeenAt = Date.now()));
  app.addHook('onClose', async () => stop());

  const checks: Record<Dependency, () => Promise<void>> = {
    database: async () => void (await p.db.prisma.$queryRawUnsafe('SELECT 1')),
    bus: async () => void (await p.bus.lastSeq()),
    cache: async () => void (await p.cache.get('cog:readyz')),
    medulla: async () => {
      const age = Date.now() - tipSeenAt;
      if (age > p.config.readyTipAgeMs) throw new Error(`tip has not moved for ${Math.round(age / 1000)} s`);
    },
    cortex: () => cortexAnswers(p.config.urls.cortex),
  };

  let last: { at: number; result: Promise<{ states: Record<string, State>; reasons: Record<string, string> }> } | undefined;
  const evaluate = () => {
    if (!last || Date.now() - last.at > CACHE_MS) {
      last = {
        at: Date.now(),
        result: (async () => {
          const states: Record<string, State> = {};
          const reasons: Record<string, string> = {};
          await Promise.all(
            needs.map(async (d) => {
              try {
                await within(checks[d](), CHECK_TIMEOUT_MS);
                states[d] = 'up';
              } catch (e) {
                states[d] = soft.has(d) ? 'degraded' : 'down';
                // The error's first line only: never a URL with credentials or a stack.
                reasons[d] = String((e as Error).message ?? e)
                  .split('\n')[0]!
                  .replace(/\w+:\/\/\S+/g, '<url>')
                  .slice(0, 200);
              }
            }),
          );
          return { states, reasons };
        })(),
      };
    }
    return last.result;
  };

  const guard = opts.public ? opsGuard(false, p.config.internalToken) : undefined;
  app.get('/readyz', { preHandler: guard }, async (_req, reply) => {
    const { states, reasons } = await evaluate();
    const down = needs.filter((d) => states[d] === 'down');
    const degraded = needs.filter((d) => states[d] === 'degraded');
    if (down.length) {
      return sendProblem(
        reply,
        new Problem(
          503,
          'NOT_READY',
          'Not ready',
          `${opts.name} is not ready: ${down.map((d) => `${d} (${reasons[d]})`).join(', ')}`,
          { service: opts.name, down, degraded, checks: states },
          { 'retry-after': '1' },
        ),
      );
    }
    return { ok: true, name: opts.name, ts: Date.now(), checks: states, ...(degraded.length ? { degraded } : {}) };
  });
}
