// Gateway /v1 routes of the economy: Shape B balances, plus the Treasury and Faucet routes served
// on the gateway too (same domain calls as :7074 and :7075).
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { stackBalancesB } from '../subgraphs/economy/treasury.ts';
import { stackIdSchema, treasuryRoutes } from '../subgraphs/economy/treasury/routes.ts';
import { faucetRoutes } from '../subgraphs/economy/faucet/routes.ts';

export default async function economyRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get<{ Params: { stackId: string } }>('/v1/stacks/:stackId/balances', {
    schema: { params: { type: 'object', required: ['stackId'], properties: { stackId: stackIdSchema } } },
  }, async (req) => stackBalancesB(p, req.params.stackId));
  await treasuryRoutes(app, opts);
  await faucetRoutes(app, opts);
}
