// /v1 sleeve routes (spec: Gateway): spawn in both shapes, list, read, decommission, sync,
// per-stack balance totals and the desync list.
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import {
  decommissionSleeve, desyncedSleeves, getSleeveView, listAliveSleeveViews, spawnSleeve, stackTokenTotals, syncSleeve,
} from '../subgraphs/sleeves/sleeves.ts';

const id = { type: 'string', minLength: 1, maxLength: 300 };
const idParams = { type: 'object', required: ['id'], properties: { id } };
const spawnA = {
  type: 'object',
  required: ['stackId', 'embodimentType'],
  properties: { stackId: id, embodimentType: { type: 'string' }, hostname: { type: ['string', 'null'] } },
};
const spawnB = {
  type: 'object',
  required: ['kind'],
  properties: { kind: { type: 'string' }, tickRate: { type: 'integer' }, hostname: { type: ['string', 'null'] } },
};

export default async function sleevesRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.post('/v1/sleeves', { schema: { body: spawnA } }, async (req, reply) => {
    const b = req.body as { stackId: string; embodimentType: string; hostname?: string | null };
    return reply.code(201).send(await spawnSleeve(p, { ...b, shape: 'A' }));
  });
  app.post('/v1/sleeves/:stackId', { schema: { params: { type: 'object', properties: { stackId: id } }, body: spawnB } }, async (req, reply) => {
    const b = req.body as { kind: string; tickRate?: number; hostname?: string | null };
    return reply.code(201).send(await spawnSleeve(p, { stackId: (req.params as { stackId: string }).stackId, kind: b.kind, tickRate: b.tickRate, hostname: b.hostname, shape: 'B' }));
  });
  app.get('/v1/sleeves', async () => listAliveSleeveViews(p));
  app.get('/v1/sleeves/:id', { schema: { params: idParams } }, async (req) => getSleeveView(p, (req.params as { id: string }).id));
  app.delete('/v1/sleeves/:id', { schema: { params: idParams } }, async (req) => {
    await decommissionSleeve(p, (req.params as { id: string }).id, 'deleted');
    return { ok: true };
  });
  app.post('/v1/sleeves/:id/sync', { schema: { params: idParams } }, async (req) => syncSleeve(p, (req.params as { id: string }).id));
  app.get('/v1/tokens/balances/:stackId', { schema: { params: { type: 'object', properties: { stackId: id } } } }, async (req) =>
    stackTokenTotals(p, (req.params as { stackId: string }).stackId),
  );
  app.get('/v1/coordination/desync', async () => desyncedSleeves(p));
}
