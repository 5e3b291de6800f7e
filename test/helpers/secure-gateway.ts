// A real gateway (router/service.ts) on a test platform with the Hippocampus in-process, for the
// security and fuzz suites: REST and GraphQL over loopback HTTP, plus a DB snapshot that shows
// whether a refused request changed anything.
import { startGateway } from '../../router/service.ts';
import { startHippocampus } from '../../subgraphs/memory/hippocampus/service.ts';
import { localHippocampus } from '../../subgraphs/memory/hippocampus/client.ts';
import type { RunningService } from '../../lib/service.ts';
import { signRequest } from '../../lib/sign.ts';
import { testPlatform, type TestPlatform } from './platform.ts';

export interface SecureGateway {
  p: TestPlatform;
  url: string;
  gateway: RunningService;
  close(): Promise<void>;
}

export async function secureGateway(env: Record<string, string> = {}, opts: { platform?: TestPlatform } = {}): Promise<SecureGateway> {
  const p = opts.platform ?? (await testPlatform({ GATEWAY_PORT: '0', HIPPOCAMPUS_PORT: '0', ...env }));
  const hippocampus = opts.platform ? undefined : await startHippocampus(p);
  if (hippocampus) p.config.urls.hippocampus = hippocampus.url!;
  if (hippocampus) p.ports.hippocampus = localHippocampus(p);
  const gateway = await startGateway(p);
  return {
    p,
    url: gateway.url!,
    gateway,
    async close() {
      await gateway.close();
      await hippocampus?.close();
      if (!opts.platform) await p.cleanup();
    },
  };
}

export interface Res {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res> {
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const r = await fetch(base + path, {
    method,
    headers: { ...(text !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: text,
  });
  const out = await r.text();
  let parsed: unknown;
  try {
    parsed = out ? JSON.parse(out) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: r.status, body: parsed, text: out, headers: r.headers };
}

export interface Identity {
  stackId: string;
  identityPriv: string;
}

/** A request signed by `who` (lib/sign.ts); the body is sent exactly as signed. */
export function signedCall(base: string, who: Identity, method: string, path: string, body?: unknown, extra: { now?: number } = {}): Promise<Res> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const headers = signRequest({ method, path, body: text, stackId: who.stackId, identityPriv: who.identityPriv, now: extra.now });
  return call(base, method, path, text, headers);
}

export const enc = encodeURIComponent;

const COUNTED = ['Stack', 'Sleeve', 'KeyLease', 'MemoryNode', 'MemoryBranch', 'LedgerEntry', 'Emission', 'Residue', 'Saga', 'ChainOutbox', 'ChainLedgerIntent'];
const SNAPSHOT_SQL = `SELECT ${COUNTED.map((t) => `(SELECT count(*) FROM "${t}")::text AS "${t}"`).join(', ')},
  (SELECT string_agg(account || '/' || token || '=' || milli::text, ',' ORDER BY account, token) FROM "Balance") AS balances,
  (SELECT string_agg(id || ':' || coalesce("episodicHead", '-') || ':' || epoch::text, ',' ORDER BY id) FROM "Stack") AS stacks,
  (SELECT string_agg(id || ':' || alive::text || ':' || frozen::text || ':' || "driftMilli"::text || ':' || "syncEpoch"::text, ',' ORDER BY id) FROM "Sleeve") AS sleeves`;

/** Row counts of every table a client can change, plus balances, heads and sleeve states (one query). */
export async function snapshot(p: TestPlatform): Promise<string> {
  const rows = await p.db.prisma.$queryRawUnsafe<Record<string, string | null>[]>(SNAPSHOT_SQL);
  return JSON.stringify(rows[0]);
}

export const isProblem = (r: Res) =>
  (r.headers.get('content-type') ?? '').includes('application/problem+json') &&
  typeof r.body?.type === 'string' &&
  typeof r.body?.title === 'string' &&
  r.body?.status === r.status &&
  typeof r.body?.detail === 'string' &&
  typeof r.body?.code === 'string';
