// Gateway /v1/needlecast: both request shapes, delegated to the Needlecast Router over HTTP.
//   Shape A {from, to}                                      -> {ok, sagaId, route: <route hash>, shards: <count>}
//   Shape B {stackId, fromSleeveId, toSleeveKind, toTickRate} -> {saga, status, from, to, cost: {routing}, shardsTransferred}
import type { FastifyInstance, FastifyReply } from 'fastify';
import { badRequest, unavailable } from '../lib/errors.ts';
import type { Platform } from '../lib/platform.ts';
import { shapeA, shapeB, type SagaView } from '../subgraphs/sleeves/needlecast/view.ts';

const idSchema = { type: 'string', minLength: 1, maxLength: 256 } as const;

async function callRouter(p: Platform, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
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

/** Router problems pass through as they are (status, problem body, Retry-After). */
function passProblem(reply: FastifyReply, status: number, json: Record<string, unknown>) {
  return reply.code(status).type('application/problem+json').send(json);
}

export default async function needlecastRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.post<{ Body: Record<string, unknown> }>('/v1/needlecast', {
    schema: {
      body: {
        type: 'object',
        properties: {
          from: idSchema, to: idSchema, sagaId: idSchema,
          stackId: idSchema, fromSleeveId: idSchema, toSleeveKind: idSchema,
          toTickRate: { type: 'integer', minimum: 0, maximum: 86_400_000 },
        },
      },
    },
  }, async (req, reply) => {
    const b = req.body ?? {};
    const shapeBReq = b.fromSleeveId !== undefined || b.toSleeveKind !== undefined;
    let routerBody: Record<string, unknown>;
    if (shapeBReq) {
      const missing = ['stackId', 'fromSleeveId', 'toSleeveKind'].filter((k) => b[k] === undefined);
      if (missing.length) throw badRequest(`Shape B needs ${missing.join(', ')}`, missing.map((path) => ({ path, message: 'is required' })));
      routerBody = { from: b.fromSleeveId, to: b.toSleeveKind, stackId: b.stackId, toTickRate: b.toTickRate, sagaId: b.sagaId, shape: 'B' };
    } else {
      const missing = ['from', 'to'].filter((k) => b[k] === undefined);
      if (missing.length) throw badRequest(`needlecast needs ${missing.join(', ')}`, missing.map((path) => ({ path, message: 'is required' })));
      routerBody = { from: b.from, to: b.to, sagaId: b.sagaId, shape: 'A' };
    }
    const { status, json } = await callRouter(p, 'POST', '/needlecast', routerBody);
    if (status >= 400) return passProblem(reply, status, json);
    const view = json as unknown as SagaView;
    return shapeBReq ? shapeB(view) : shapeA(view);
  });
  app.get<{ Params: { sagaId: string } }>('/v1/needlecast/:sagaId', { schema: { params: { type: 'object', properties: { sagaId: idSchema } } } }, async (req, reply) => {
    const { status, json } = await callRouter(p, 'GET', `/needlecast/${encodeURIComponent(req.params.sagaId)}`);
    if (status >= 400) return passProblem(reply, status, json);
    return json;
  });
}
