// Treasury HTTP routes, shared by the Treasury service (:7074) and the gateway's /v1 shim.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Platform } from '../../../lib/platform.ts';
import { claim, issuance } from '../treasury.ts';

export const StackIdSchema = Type.String({ minLength: 1, maxLength: 256 });
export const StackIdParams = Type.Object({ stackId: StackIdSchema });
export const StackIdBody = Type.Object({ stackId: StackIdSchema });

export async function treasuryRoutes(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/v1/treasury/issuance/:stackId', { schema: { params: StackIdParams } }, async (req) => issuance(p, req.params.stackId));
  app.post('/v1/treasury/claim', { schema: { body: StackIdBody } }, async (req) => claim(p, req.body.stackId));
}
