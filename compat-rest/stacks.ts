// /v1 stack routes (spec: Gateway). Creation answers 201 with the stack (identityPriv in Shape A).
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { createStack, getStackRow, listStacks, stackView } from '../subgraphs/stacks/stacks.ts';

const coeff = { type: 'number' };
const createBody = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    kind: { type: 'string' },
    pubkey: { type: 'string' },
    cpv: { type: 'object', properties: { syncCoeff: coeff, memoryCoeff: coeff, computeCoeff: coeff, residueCoeff: coeff, routingCoeff: coeff } },
  },
};
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 300 } } };

export default async function stacksRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.post('/v1/stacks', { schema: { body: createBody } }, async (req, reply) => reply.code(201).send(await createStack(p, req.body as never)));
  app.get('/v1/stacks', async () => listStacks(p));
  app.get('/v1/stacks/:id', { schema: { params: idParams } }, async (req) => {
    const row = await getStackRow(p.db.prisma, (req.params as { id: string }).id);
    return stackView(p, row);
  });
}
