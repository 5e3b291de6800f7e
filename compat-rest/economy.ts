// Gateway /v1 routes of the economy: Shape B balances, plus the Treasury and Faucet routes served
// on the gateway too (same domain calls as :7074 and :7075).
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Platform } from '../lib/platform.ts';
import { stackBalancesB, treasuryRoutes, faucetRoutes } from '../subgraphs/economy/index.ts';
import { BalancesParams } from './schemas.ts';

export default async function economyRest(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/v1/stacks/:stackId/balances', { schema: { params: BalancesParams } }, async (req) => stackBalancesB(p, req.params.stackId));
  await treasuryRoutes(fastify, opts);
  await faucetRoutes(fastify, opts);
}
