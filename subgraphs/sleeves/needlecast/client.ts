// The gateway's side of needlecasting: maps a request in either gateway shape onto the Needlecast
// Router's body and calls the router over HTTP. Shared by the /v1 REST shim and the GraphQL
// resolver, so both refuse and delegate the same way.
//   Shape A {from, to}                                      -> router {from, to, shape: 'A'}
//   Shape B {stackId, fromSleeveId, toSleeveKind, toTickRate} -> router {from, to, stackId, toTickRate, shape: 'B'}
import { Problem, badRequest, unavailable } from '../../../lib/errors.ts';
import type { Platform } from '../../../lib/platform.ts';

export interface GatewayNeedlecastRequest {
  from?: unknown;
  to?: unknown;
  sagaId?: unknown;
  stackId?: unknown;
  fromSleeveId?: unknown;
  toSleeveKind?: unknown;
  toTickRate?: unknown;
}

/** Which shape a gateway request has, and the router body for it (400 naming missing fields). */
export function routerRequest(b: GatewayNeedlecastRequest): { shape: 'A' | 'B'; body: Record<string, unknown> } {
  const shapeB = b.fromSleeveId !== undefined || b.toSleeveKind !== undefined;
  const need = shapeB ? ['stackId', 'fromSleeveId', 'toSleeveKind'] : ['from', 'to'];
  const missing = need.filter((k) => (b as Record<string, unknown>)[k] === undefined);
  if (missing.length) {
    throw badRequest(shapeB ? `Shape B needs ${missing.join(', ')}` : `needlecast needs ${missing.join(', ')}`, missing.map((path) => ({ path, message: 'is required' })));
  }
  return shapeB
    ? { shape: 'B', body: { from: b.fromSleeveId, to: b.toSleeveKind, stackId: b.stackId, toTickRate: b.toTickRate, sagaId: b.sagaId, shape: 'B' } }
    : { shape: 'A', body: { from: b.from, to: b.to, sagaId: b.sagaId, shape: 'A' } };
}

/** One call to the router; 5xx and unreachable become 503. Client errors come back as they are. */
export async function callRouter(p: Platform, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  let res: Response;
  try {
    res = await fetch(`${p.config.urls.needlecast}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...(p.config.internalToken ? { authorization: `Bearer ${p.config.internalToken}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
  } catch {
    throw unavailable('the Needlecast Router is not reachable');
  }
  const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (res.status >= 500) throw unavailable(`the Needlecast Router answered ${res.status}`);
  return { status: res.status, json };
}

const STANDARD = new Set(['type', 'title', 'status', 'detail', 'code']);

/** A router problem+json body as the Problem it was (same status, code and extra members). */
export function problemFromRouter(status: number, json: Record<string, unknown>): Problem {
  const extra = Object.fromEntries(Object.entries(json).filter(([k]) => !STANDARD.has(k)));
  const code = typeof json.code === 'string' ? json.code : `HTTP_${status}`;
  const title = typeof json.title === 'string' ? json.title : 'Needlecast refused';
  return new Problem(status, code, title, typeof json.detail === 'string' ? json.detail : undefined, extra);
}
