// Chains subgraph resolvers: the current epoch and Medulla blocks (through Medulla's RPC).
import type { GqlContext } from '../../lib/graphql.ts';
import { guarded, health } from '../../lib/graphql.ts';
import { notFound, unavailable } from '../../lib/errors.ts';

async function rpc(ctx: GqlContext, method: string, params: unknown[]): Promise<Record<string, unknown> | null> {
  let res: Response;
  try {
    res = await fetch(`${ctx.platform.config.urls.medulla}/rpc`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), signal: AbortSignal.timeout(5000),
    });
  } catch {
    throw unavailable('Medulla is not reachable');
  }
  const body = (await res.json()) as { result?: Record<string, unknown>; error?: { message: string } };
  return body.result ?? null;
}

export const resolvers = {
  Query: {
    currentEpoch: guarded((_: unknown, __: unknown, ctx: GqlContext) => ctx.platform.epochs.info()),
    block: guarded(async (_: unknown, a: { height: number }, ctx: GqlContext) => rpc(ctx, 'getblock', [a.height])),
    chainsHealth: health('chains'),
  },
  Block: {
    __resolveReference: guarded(async (ref: { height: number }, ctx: GqlContext) => {
      const b = await rpc(ctx, 'getblock', [ref.height]);
      if (!b) throw notFound('Block', String(ref.height));
      return b;
    }),
  },
  Epoch: {
    __resolveReference: (ref: { epoch: number }, ctx: GqlContext) => {
      const info = ctx.platform.epochs.info();
      return ref.epoch === info.epoch ? info : { epoch: ref.epoch, height: ref.epoch, tip: '' };
    },
  },
};
