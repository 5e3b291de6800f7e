// Memory subgraph resolvers: DAG node metadata (contents stay sealed), Stack.memory.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';

type NodeRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['memoryNode']['findUnique']>>>;
const gqlNode = (r: NodeRow) => ({ cid: r.cid, stackId: r.stackId, epoch: r.epoch, links: r.links, kind: r.kind, pinned: r.pinned });

const nodeLoader = (ctx: GqlContext) =>
  loader<string, NodeRow | null>(ctx, 'memoryNode', async (cids) =>
    byKey(cids, await ctx.platform.db.prisma.memoryNode.findMany({ where: { cid: { in: [...cids] } } }), (r) => r.cid),
  );

export const resolvers = {
  Query: {
    memoryNode: guarded(async (_: unknown, a: { cid: string }, ctx: GqlContext) => {
      const r = await nodeLoader(ctx).load(a.cid);
      return r && gqlNode(r);
    }),
    memoryHealth: health('memory'),
  },
  MemoryNode: {
    __resolveReference: guarded(async (ref: { cid: string }, ctx: GqlContext) => {
      const r = await nodeLoader(ctx).load(ref.cid);
      return r && gqlNode(r);
    }),
  },
  Stack: {
    __resolveReference: (ref: { id: string }) => ref,
    memory: guarded(async (s: { id: string }, a: { first: number }, ctx: GqlContext) => {
      const rows = await ctx.platform.db.prisma.memoryNode.findMany({ where: { stackId: s.id }, orderBy: { writeSeq: 'desc' }, take: Math.min(Math.max(a.first, 0), 1000) });
      return rows.map(gqlNode);
    }),
  },
};
