// /v1 stack routes (spec: Gateway). Creation answers 201 with the stack (identityPriv in Shape A).
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Platform } from '../lib/platform.ts';
import { createStack } from '../subgraphs/stacks/index.ts';
import { registrationFile } from '../flows/registration.ts';
import { listStacks, readStackView } from '../flows/stack-reads.ts';
import { CreateStackBody, IdParams } from './schemas.ts';

export default async function stacksRest(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/v1/stacks', { schema: { body: CreateStackBody } }, async (req, reply) => reply.code(201).send(await createStack(p, req.body)));
  app.get('/v1/stacks', async () => listStacks(p));
  app.get('/v1/stacks/:id', { schema: { params: IdParams } }, async (req) => readStackView(p, req.params.id));
  // The ERC-8004 registration file the stack's identity NFT (tokenURI / agentURI) names.
  app.get('/v1/stacks/:id/registration.json', { schema: { params: IdParams } }, async (req) =>
    registrationFile(p, req.params.id, { mcp: app.hasRoute({ method: 'POST', url: '/mcp' }) }),
  );
}
