// Stacks subgraph resolvers: identity records, batched through DataLoader.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';
import { createStack, getStackRow } from './stacks.ts';

type StackRow = Awaited<ReturnType<GqlContext['platform']['db']['prisma']['stack']['findUnique']>> & {};

function stackLoader(ctx: GqlContext) {
  return loader<string, StackRow | null>(ctx, 'stack', async (ids) =>
    byKey(ids, await ctx.platform.db.prisma.stack.findMany({ where: { id: { in: [...ids] } } }), (r) => r.id),
  );
}

function gqlStack(r: StackRow) {
  return {
    id: r.id, tokenId: r.tokenId, name: r.name, kind: r.kind, pubKey: r.pubKey, epoch: r.epoch, episodicHead: r.episodicHead,
    cpv: { syncCoeff: r.syncCoeff, memoryCoeff: r.memoryCoeff, computeCoeff: r.computeCoeff, residueCoeff: r.residueCoeff, routingCoeff: r.routingCoeff },
    binding: { floor: r.bindingFloor, decayRate: r.bindingDecay },
    createdAt: r.createdAt.toISOString(), chainStatus: r.chainStatus,
  };
}

export const resolvers = {
  Mutation: {
    createStack: guarded(async (_: unknown, a: { name?: string; kind?: string; pubkey?: string; cpv?: Record<string, number> }, ctx: GqlContext) => {
      const created = await createStack(ctx.platform, a);
      return { stack: gqlStack(await getStackRow(ctx.platform.db.prisma, created.id)), identityPriv: created.identityPriv ?? null };
    }),
  },
  Query: {
    stack: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const r = await stackLoader(ctx).load(a.id);
      return r && gqlStack(r);
    }),
    stacks: guarded(async (_: unknown, a: { first: number }, ctx: GqlContext) => {
      const rows = await ctx.platform.db.prisma.stack.findMany({ orderBy: { tokenId: 'asc' }, take: Math.min(Math.max(a.first, 0), 1000) });
      for (const r of rows) stackLoader(ctx).prime(r.id, r);
      return rows.map(gqlStack);
    }),
    stacksHealth: health('stacks'),
  },
  Stack: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => {
      const r = await stackLoader(ctx).load(ref.id);
      return r && gqlStack(r);
    }),
  },
};
