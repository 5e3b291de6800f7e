// Residues subgraph resolvers.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';
import { residueView } from './open.ts';

type ResidueRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['residue']['findUnique']>>>;
const residueLoader = (ctx: GqlContext) =>
  loader<string, ResidueRow | null>(ctx, 'residue', async (ids) =>
    byKey(ids, await ctx.platform.db.prisma.residue.findMany({ where: { id: { in: [...ids] } } }), (r) => r.id),
  );

export const resolvers = {
  Query: {
    residue: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const r = await residueLoader(ctx).load(a.id);
      return r && residueView(r);
    }),
    residues: guarded(async (_: unknown, a: { first: number }, ctx: GqlContext) =>
      (await ctx.platform.db.prisma.residue.findMany({ orderBy: { openedAt: 'desc' }, take: Math.min(Math.max(a.first, 0), 50) })).map(residueView),
    ),
    residuesHealth: health('residues'),
  },
  Residue: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => {
      const r = await residueLoader(ctx).load(ref.id);
      return r && residueView(r);
    }),
  },
};
