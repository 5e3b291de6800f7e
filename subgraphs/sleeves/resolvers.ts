// Sleeves subgraph resolvers: sleeves, Stack.sleeves, sagas; batched through DataLoader.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';
import { decommissionSleeve, getSleeveRow, spawnSleeve, syncSleeve } from './sleeves.ts';

type SleeveRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['sleeve']['findUnique']>>>;

function gqlSleeve(r: SleeveRow) {
  return {
    id: r.id, stackId: r.stackId, embodimentType: r.embodimentType, alive: r.alive, drift: r.driftMilli / 1000,
    syncEpoch: r.syncEpoch, lastSync: r.lastSync.toISOString(), hostname: r.hostname, tickRate: r.tickRate, createdAt: r.createdAt.toISOString(),
  };
}

const sleeveLoader = (ctx: GqlContext) =>
  loader<string, SleeveRow | null>(ctx, 'sleeve', async (ids) =>
    byKey(ids, await ctx.platform.db.prisma.sleeve.findMany({ where: { id: { in: [...ids] } } }), (r) => r.id),
  );

const sleevesOfStack = (ctx: GqlContext) =>
  loader<string, SleeveRow[]>(ctx, 'sleevesOfStack', async (stackIds) => {
    const rows = await ctx.platform.db.prisma.sleeve.findMany({ where: { stackId: { in: [...stackIds] } }, orderBy: { seq: 'asc' } });
    return stackIds.map((id) => rows.filter((r) => r.stackId === id));
  });

export const resolvers = {
  Mutation: {
    spawnSleeve: guarded(async (_: unknown, a: { stackId: string; embodimentType?: string; kind?: string; hostname?: string; tickRate?: number }, ctx: GqlContext) => {
      const v = await spawnSleeve(ctx.platform, { ...a, shape: a.embodimentType !== undefined && a.embodimentType !== null ? 'A' : 'B' });
      return gqlSleeve(await getSleeveRow(ctx.platform.db.prisma, v.id));
    }),
    decommissionSleeve: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      await decommissionSleeve(ctx.platform, a.id, 'deleted');
      return gqlSleeve(await getSleeveRow(ctx.platform.db.prisma, a.id));
    }),
    syncSleeve: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => syncSleeve(ctx.platform, a.id)),
  },
  Query: {
    sleeve: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const r = await sleeveLoader(ctx).load(a.id);
      return r && gqlSleeve(r);
    }),
    sleeves: guarded(async (_: unknown, __: unknown, ctx: GqlContext) =>
      (await ctx.platform.db.prisma.sleeve.findMany({ where: { alive: true }, orderBy: { seq: 'asc' } })).map(gqlSleeve),
    ),
    saga: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const s = await ctx.platform.db.prisma.saga.findUnique({ where: { id: a.id } });
      return s && { id: s.id, status: s.status };
    }),
    sleevesHealth: health('sleeves'),
  },
  Sleeve: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => {
      const r = await sleeveLoader(ctx).load(ref.id);
      return r && gqlSleeve(r);
    }),
    stack: (s: { stackId: string }) => ({ __typename: 'Stack', id: s.stackId }),
  },
  Stack: {
    __resolveReference: (ref: { id: string }) => ref,
    sleeves: guarded(async (s: { id: string }, _: unknown, ctx: GqlContext) => (await sleevesOfStack(ctx).load(s.id)).map(gqlSleeve)),
  },
  Saga: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => {
      const s = await ctx.platform.db.prisma.saga.findUnique({ where: { id: ref.id } });
      return s && { id: s.id, status: s.status };
    }),
  },
};
