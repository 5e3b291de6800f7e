// The gateway's side of needlecasting: maps a request in either gateway shape onto the Needlecast
// Router's body and calls the router over HTTP. Shared by the /v1 REST shim and the GraphQL
// resolver, so both refuse and delegate the same way.
//   Shape A {from, to}                                      -> router {from, to, shape: 'A'}
//   Shape B {stackId, fromSleeveId, toSleeveKind, toTickRate} -> router {from, to, stackId, toTickRate, shape: 'B'}
import { badRequest, type Problem } from '../../../lib/errors.ts';
import { internalClient, problemFromJson } from '../../../lib/internal-client.ts';
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
    throw badRequest(
      shapeB ? `Shape B needs ${missing.join(', ')}` : `needlecast needs ${missing.join(', ')}`,
      missing.map((path) => ({ path, message: 'is required' })),
    );
  }
  return shapeB
    ? { shape: 'B', body: { from: b.fromSleeveId, to: b.toSleeveKind, stackId: b.stackId, toTickRate: b.toTickRate, sagaId: b.sagaId, shape: 'B' } }
    : { shape: 'A', body: { from: b.from, to: b.to, sagaId: b.sagaId, shape: 'A' } };
}

/** One call to the router (the internal service client); 5xx and unreachable become 503. Client errors come back as they are. */
export async function callRouter(p: Platform, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  return internalClient({ name: 'Needlecast Router', baseUrls: p.config.urls.needlecast, token: p.config.internalToken, timeoutMs: 60_000 }).send(
    method,
    path,
    body,
  );
}

/** A router problem+json body as the Problem it was (same status, code and extra members). */
export const problemFromRouter = (status: number, json: Record<string, unknown>): Problem => problemFromJson(status, json, 'Needlecast refused');
