// Faucet HTTP route, shared by the Faucet service (:7075) and the gateway's /v1 shim. Public, so
// also rate limited per client address (FAUCET_IP_LIMIT drips a minute) before any work is done.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { tooManyRequests } from '../../../lib/errors.ts';
import type { Platform } from '../../../lib/platform.ts';
import { drip } from '../faucet.ts';
import { StackIdBody } from '../treasury/routes.ts';

export const FAUCET_IP_LIMIT = 30;

export async function faucetRoutes(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/v1/faucet/drip', { schema: { body: StackIdBody } }, async (req) => {
    const minute = Math.floor(Date.now() / 60_000);
    const hits = await p.cache.incr(`faucet-ip:${req.ip}:${minute}`, 60_000);
    if (hits > FAUCET_IP_LIMIT) {
      throw tooManyRequests(`At most ${FAUCET_IP_LIMIT} faucet requests a minute per client`, 60 - (Math.floor(Date.now() / 1000) % 60));
    }
    return drip(p, req.body.stackId);
  });
}
