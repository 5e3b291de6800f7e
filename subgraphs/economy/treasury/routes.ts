// Treasury HTTP routes, shared by the Treasury service (:7074) and the gateway's /v1 shim.
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../../../lib/platform.ts';
import { claim, issuance } from '../treasury.ts';

export const stackIdSchema = { type: 'string', minLength: 1, maxLength: 256 } as const;

export async function treasuryRoutes(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get<{ Params: { stackId: string } }>('/v1/treasury/issuance/:stackId', {
    schema: { params: { type: 'object', required: ['stackId'], properties: { stackId: stackIdSchema } } },
  }, async (req) => issuance(p, req.params.stackId));
  app.post<{ Body: { stackId: string } }>('/v1/treasury/claim', {
    schema: { body: { type: 'object', required: ['stackId'], properties: { stackId: stackIdSchema } } },
  }, async (req) => claim(p, req.body.stackId));
}
