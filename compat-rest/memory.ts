// /v1 memory routes (spec: Gateway): perceive and recall in both shapes, remember (ARCHITECTURE.md).
// GET /v1/stacks/:id/recall keeps Shape A (fragments are Memory nodes, broken an array of CIDs);
// POST /v1/recall keeps Shape B (decrypted fragments, broken a count, cost).
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Platform } from '../lib/platform.ts';
import { perceive, pinNode, remember } from '../flows/memory.ts';
import { recall, type RecallResult } from '../flows/recall.ts';
import { IdParams, PerceiveBody, PerceiveSleeveBody, PinBody, RecallBody, RecallQuery, RememberBody } from './schemas.ts';

export const recallShapeA = (r: RecallResult) => ({ fragments: r.fragments.map((f) => f.node), broken: r.broken, fidelity: r.fidelity });
export const recallShapeB = (r: RecallResult) => ({
  fragments: r.fragments.map((f) => ({ cid: f.node.cid, text: f.text, epoch: f.node.epoch })),
  broken: r.broken.length,
  fidelity: r.fidelity,
  cost: r.cost,
});

export default async function memoryRest(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/v1/sleeves/:id/perceive', { schema: { params: IdParams, body: PerceiveSleeveBody } }, async (req) => {
    const r = await perceive(p, { sleeveId: req.params.id, text: req.body.input, field: 'input' });
    return { cid: r.cid, thought: r.thought };
  });
  app.post('/v1/perceive', { schema: { body: PerceiveBody } }, async (req) => {
    const r = await perceive(p, req.body);
    return { cid: r.cid, epoch: r.epoch, cost: r.cost };
  });
  app.post('/v1/stacks/:id/remember', { schema: { params: IdParams, body: RememberBody } }, async (req) => {
    return { cid: (await remember(p, { stackId: req.params.id, text: req.body.text, pin: req.body.pin })).cid };
  });
  app.post('/v1/sleeves/:id/remember', { schema: { params: IdParams, body: RememberBody } }, async (req) => {
    return { cid: (await remember(p, { sleeveId: req.params.id, text: req.body.text, pin: req.body.pin })).cid };
  });
  // The spec's pin that costs memory tokens: 1 from this sleeve (0 when already pinned). The
  // Hippocampus's own POST /dag/:cid/pin stays the uncharged storage primitive (docs/decisions.md).
  app.post('/v1/sleeves/:id/pin', { schema: { params: IdParams, body: PinBody } }, async (req) => pinNode(p, req.body.cid, req.params.id));
  app.get('/v1/stacks/:id/recall', { schema: { params: IdParams, querystring: RecallQuery } }, async (req) => {
    return recallShapeA(await recall(p, { stackId: req.params.id, depth: req.query.depth, memoryToken: req.query.memoryToken }));
  });
  app.post('/v1/recall', { schema: { body: RecallBody } }, async (req) => recallShapeB(await recall(p, req.body)));
}
