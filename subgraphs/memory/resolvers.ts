// Memory subgraph resolvers: DAG node metadata (contents stay sealed), Stack.memory.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';
import { perceive, recall, remember } from './memory.ts';

type NodeRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['memoryNode']['findUnique']>>>;
type NodeMeta = Pick<NodeRow, 'cid' | 'stackId' | 'epoch' | 'links' | 'kind' | 'pinned'>;
const gqlNode = (r: NodeMeta) => ({ cid: r.cid, stackId: r.stackId, epoch: r.epoch, links: r.links, kind: r.kind, pinned: r.pinned });

const nodeLoader = (ctx: GqlContext) =>
  loader<string, NodeRow | null>(ctx, 'memoryNode', async (cids) =>
    byKey(cids, await ctx.platform.db.prisma.memoryNode.findMany({ where: { cid: { in: [...cids] } } }), (r) => r.cid),
  );

/** The newest `first` nodes of many stacks in one query (a window function per stack). */
const newestNodes = (ctx: GqlContext, first: number) =>
  loader<string, NodeMeta[]>(ctx, `newestNodes:${first}`, async (stackIds) => {
    const rows = await ctx.platform.db.prisma.$queryRaw<NodeMeta[]>`
      SELECT cid, "stackId", epoch, links, kind, pinned FROM (
        SELECT *, row_number() OVER (PARTITION BY "stackId" ORDER BY "writeSeq" DESC) AS rn
        FROM "MemoryNode" WHERE "stackId" = ANY(${[...stackIds]})
      ) t WHERE rn <= ${first} ORDER BY rn`;
    return stackIds.map((id) => rows.filter((r) => r.stackId === id));
  });

export const resolvers = {
  Mutation: {
    perceive: guarded(async (_: unknown, a: { sleeveId: string; stackId?: string; text: string }, ctx: GqlContext) => {
      const r = await perceive(ctx.platform, { sleeveId: a.sleeveId, stackId: a.stackId ?? undefined, text: a.text });
      return { cid: r.cid, epoch: r.epoch, thought: r.thought };
    }),
    remember: guarded(async (_: unknown, a: { stackId?: string; sleeveId?: string; text: string; pin: boolean }, ctx: GqlContext) =>
      ({ cid: (await remember(ctx.platform, { stackId: a.stackId ?? undefined, sleeveId: a.sleeveId ?? undefined, text: a.text, pin: a.pin })).cid })),
    recall: guarded(async (_: unknown, a: { stackId: string; depth: number; sleeveId?: string; memoryToken?: number }, ctx: GqlContext) => {
      const r = await recall(ctx.platform, { stackId: a.stackId, depth: a.depth, sleeveId: a.sleeveId ?? undefined, memoryToken: a.memoryToken ?? undefined });
      return { fragments: r.fragments.map((f) => ({ cid: f.node.cid, text: f.text, epoch: f.node.epoch })), broken: r.broken, fidelity: r.fidelity, cost: r.cost };
    }),
  },
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
      const first = Math.min(Math.max(a.first, 0), 1000);
      return (await newestNodes(ctx, first).load(s.id)).map(gqlNode);
    }),
  },
};
