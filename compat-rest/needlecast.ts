// Gateway /v1/needlecast: both request shapes, delegated to the Needlecast Router over HTTP.
//   Shape A {from, to}                                      -> {ok, sagaId, route: <route hash>, shards: <count>}
//   Shape B {stackId, fromSleeveId, toSleeveKind, toTickRate} -> {saga, status, from, to, cost: {routing}, shardsTransferred}
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Platform } from '../lib/platform.ts';
import { shapeA, shapeB, type SagaView, callRouter, routerRequest } from '../subgraphs/sleeves/index.ts';
import { NeedlecastBody, SagaIdParams } from './schemas.ts';

/** Router problems pass through as they are (status, problem body, Retry-After). */
function passProblem(reply: FastifyReply, status: number, json: Record<string, unknown>) {
  return reply.code(status).type('application/problem+json').send(json);
}

export default async function needlecastRest(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/v1/needlecast', { schema: { body: NeedlecastBody } }, async (req, reply) => {
    const { shape, body: routerBody } = routerRequest(req.body ?? {});
    const { status, json } = await callRouter(p, 'POST', '/needlecast', routerBody);
    if (status >= 400) return passProblem(reply, status, json);
    const view = json as unknown as SagaView;
    return shape === 'B' ? shapeB(view) : shapeA(view);
  });
  app.get('/v1/needlecast/:sagaId', { schema: { params: SagaIdParams } }, async (req, reply) => {
    const { status, json } = await callRouter(p, 'GET', `/needlecast/${encodeURIComponent(req.params.sagaId)}`);
    if (status >= 400) return passProblem(reply, status, json);
    return json;
  });
}
