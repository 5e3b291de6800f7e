// /v1 memory routes (spec: Gateway): perceive and recall in both shapes, remember (ARCHITECTURE.md).
// GET /v1/stacks/:id/recall keeps Shape A (fragments are Memory nodes, broken an array of CIDs);
// POST /v1/recall keeps Shape B (decrypted fragments, broken a count, cost).
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { perceive, recall, remember, type RecallResult } from '../subgraphs/memory/memory.ts';

const id = { type: 'string', minLength: 1, maxLength: 300 };
const idParams = { type: 'object', required: ['id'], properties: { id } };
const rememberBody = { type: 'object', required: ['text'], properties: { text: { type: 'string' }, pin: { type: 'boolean' } } };

export const recallShapeA = (r: RecallResult) => ({ fragments: r.fragments.map((f) => f.node), broken: r.broken, fidelity: r.fidelity });
export const recallShapeB = (r: RecallResult) => ({
  fragments: r.fragments.map((f) => ({ cid: f.node.cid, text: f.text, epoch: f.node.epoch })),
  broken: r.broken.length,
  fidelity: r.fidelity,
  cost: r.cost,
});

export default async function memoryRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.post('/v1/sleeves/:id/perceive', { schema: { params: idParams, body: { type: 'object', required: ['input'], properties: { input: { type: 'string' } } } } }, async (req) => {
    const r = await perceive(p, { sleeveId: (req.params as { id: string }).id, text: (req.body as { input: string }).input, field: 'input' });
    return { cid: r.cid, thought: r.thought };
  });
  app.post('/v1/perceive', { schema: { body: { type: 'object', required: ['stackId', 'sleeveId', 'text'], properties: { stackId: id, sleeveId: id, text: { type: 'string' } } } } }, async (req) => {
    const b = req.body as { stackId: string; sleeveId: string; text: string };
    const r = await perceive(p, b);
    return { cid: r.cid, epoch: r.epoch, cost: r.cost };
  });
  app.post('/v1/stacks/:id/remember', { schema: { params: idParams, body: rememberBody } }, async (req) => {
    const b = req.body as { text: string; pin?: boolean };
    return { cid: (await remember(p, { stackId: (req.params as { id: string }).id, text: b.text, pin: b.pin })).cid };
  });
  app.post('/v1/sleeves/:id/remember', { schema: { params: idParams, body: rememberBody } }, async (req) => {
    const b = req.body as { text: string; pin?: boolean };
    return { cid: (await remember(p, { sleeveId: (req.params as { id: string }).id, text: b.text, pin: b.pin })).cid };
  });
  app.get('/v1/stacks/:id/recall', {
    schema: { params: idParams, querystring: { type: 'object', required: ['depth'], properties: { depth: { type: 'integer' }, memoryToken: { type: 'number' } } } },
  }, async (req) => {
    const q = req.query as { depth: number; memoryToken?: number };
    return recallShapeA(await recall(p, { stackId: (req.params as { id: string }).id, depth: q.depth, memoryToken: q.memoryToken }));
  });
  app.post('/v1/recall', { schema: { body: { type: 'object', required: ['stackId', 'depth'], properties: { stackId: id, depth: { type: 'integer' }, sleeveId: id } } } }, async (req) => {
    const b = req.body as { stackId: string; depth: number; sleeveId?: string };
    return recallShapeB(await recall(p, b));
  });
}
