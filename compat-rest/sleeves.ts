// /v1 sleeve routes (spec: Gateway): spawn in both shapes, list, read, decommission, sync,
// per-stack balance totals and the desync list.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Platform } from '../lib/platform.ts';
import {
  decommissionSleeve,
  desyncedSleeves,
  getSleeveView,
  listAliveSleeveViews,
  spawnSleeve,
  stackTokenTotals,
  syncSleeve,
} from '../subgraphs/sleeves/index.ts';
import { IdParams, SleeveStackIdParams, SpawnSleeveBodyA, SpawnSleeveBodyB } from './schemas.ts';

export default async function sleevesRest(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/v1/sleeves', { schema: { body: SpawnSleeveBodyA } }, async (req, reply) =>
    reply.code(201).send(await spawnSleeve(p, { ...req.body, shape: 'A' })),
  );
  app.post('/v1/sleeves/:stackId', { schema: { params: SleeveStackIdParams, body: SpawnSleeveBodyB } }, async (req, reply) => {
    const b = req.body;
    return reply.code(201).send(await spawnSleeve(p, { stackId: req.params.stackId, kind: b.kind, tickRate: b.tickRate, hostname: b.hostname, shape: 'B' }));
  });
  app.get('/v1/sleeves', async () => listAliveSleeveViews(p));
  app.get('/v1/sleeves/:id', { schema: { params: IdParams } }, async (req) => getSleeveView(p, req.params.id));
  app.delete('/v1/sleeves/:id', { schema: { params: IdParams } }, async (req) => {
    await decommissionSleeve(p, req.params.id, 'deleted');
    return { ok: true };
  });
  app.post('/v1/sleeves/:id/sync', { schema: { params: IdParams } }, async (req) => syncSleeve(p, req.params.id));
  app.get('/v1/tokens/balances/:stackId', { schema: { params: SleeveStackIdParams } }, async (req) => stackTokenTotals(p, req.params.stackId));
  app.get('/v1/coordination/desync', async () => desyncedSleeves(p));
}
