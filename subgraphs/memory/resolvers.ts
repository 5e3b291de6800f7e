// Memory subgraph resolvers: DAG node metadata (contents stay sealed), Stack.memory and the DHF
// reconstruct. The perceive / remember / recall mutations span contexts: flows/graphql.ts.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader, read } from '../../lib/graphql.ts';
import { dhfReconstruct } from './dhf/reconstruct.ts';
import { hippocampusClient } from './hippocampus/client.ts';
import { GATING_WINDOW } from './hippocampus/store.ts';
import { badRequest } from '../../lib/errors.ts';
import { sql } from '../../lib/db/index.ts';
import { jsonRows } from '../../lib/db/statement.ts';

type NodeRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['memoryNode']['findUnique']>>>;
type NodeMeta = Pick<NodeRow, 'cid' | 'stackId' | 'epoch' | 'links' | 'kind' | 'pinned' | 'branchId' | 'sleeveId'>;
const gqlNode = (r: NodeMeta) => ({
  cid: r.cid,
  stackId: r.stackId,
  epoch: r.epoch,
  links: r.links,
  kind: r.kind,
  pinned: r.pinned,
  readableUntilEpoch: r.pinned ? null : r.epoch + GATING_WINDOW,
  branchId: r.branchId,
  sleeveId: r.sleeveId,
});

const nodeLoader = (ctx: GqlContext) =>
  loader<string, NodeRow | null>(ctx, 'memoryNode', async (cids) =>
    byKey(cids, await ctx.platform.db.prisma.memoryNode.findMany({ where: { cid: { in: [...cids] } } }), (r) => r.cid),
  );

/** A node's metadata over the row, as a json array (lib/db/statement.ts jsonRows). */
const nodeMetaRow = jsonRows<NodeMeta>([
  ['cid', sql`cid`],
  ['stackId', sql`"stackId"`],
  ['epoch', sql`epoch`],
  ['links', sql`links`],
  ['kind', sql`kind`],
  ['pinned', sql`pinned`],
  ['branchId', sql`"branchId"`],
  ['sleeveId', sql`"sleeveId"`],
]);

/**
 * The newest nodes `offset + 1` to `offset + first` of many stacks in one read (a window function
 * per stack; the rows come back as one json value), batched with the request's other reads.
 */
const newestNodes = (ctx: GqlContext, first: number, offset: number) =>
  loader<string, NodeMeta[]>(ctx, `newestNodes:${first}:${offset}`, async (stackIds) => {
    const rows = await read(ctx, {
      expr: sql`SELECT json_agg(${nodeMetaRow.row} ORDER BY rn) FROM (
          SELECT cid, "stackId", epoch, links, kind, pinned, "branchId", "sleeveId",
            row_number() OVER (PARTITION BY "stackId" ORDER BY "writeSeq" DESC) AS rn
          FROM "MemoryNode" WHERE "stackId" = ANY(${[...stackIds]}::text[])
        ) t WHERE rn > ${offset}::int AND rn <= ${offset + first}::int`,
      parse: nodeMetaRow.parse,
    });
    const byStack = new Map<string, NodeMeta[]>(stackIds.map((id) => [id, []]));
    for (const r of rows) byStack.get(r.stackId)?.push(r);
    return stackIds.map((id) => byStack.get(id)!);
  });

/** `node` of a result: loaded here (this subgraph owns MemoryNode), batched with every other node. */
const loadNode = guarded(async (o: { cid: string }, _: unknown, ctx: GqlContext) => {
  const r = await nodeLoader(ctx).load(o.cid);
  return r && gqlNode(r);
});
const fragment = (f: { cid: string; text: string; epoch: number }) => ({ cid: f.cid, text: f.text, epoch: f.epoch });

export const resolvers = {
  Query: {
    memoryNode: guarded(async (_: unknown, a: { cid: string }, ctx: GqlContext) => {
      const r = await nodeLoader(ctx).load(a.cid);
      return r && gqlNode(r);
    }),
    hippocampusStats: guarded((_: unknown, __: unknown, ctx: GqlContext) => hippocampusClient(ctx.platform).stats()),
    reconstruct: guarded(async (_: unknown, a: { stackId: string; sleeveId: string; depth: number }, ctx: GqlContext) => {
      const r = await dhfReconstruct(ctx.platform, a);
      return { ...r, fragments: r.fragments.map(fragment) };
    }),
    memoryHealth: health('memory'),
  },
  MemoryNode: {
    __resolveReference: guarded(async (ref: { cid: string }, ctx: GqlContext) => {
      const r = await nodeLoader(ctx).load(ref.cid);
      return r && gqlNode(r);
    }),
    stack: (n: { stackId: string }) => ({ __typename: 'Stack', id: n.stackId }),
    linked: guarded(async (n: { links: string[] }, _: unknown, ctx: GqlContext) =>
      (await nodeLoader(ctx).loadMany(n.links)).filter((r): r is NodeRow => !!r && !(r instanceof Error)).map(gqlNode),
    ),
  },
  PerceiveResult: { node: loadNode },
  RememberResult: { node: loadNode },
  RecallFragment: { node: loadNode },
  Stack: {
    __resolveReference: (ref: { id: string }) => ref,
    memory: guarded(async (s: { id: string }, a: { first: number; offset?: number }, ctx: GqlContext) => {
      const first = Math.min(Math.max(a.first ?? 20, 0), 1000);
      const offset = a.offset ?? 0;
      if (!Number.isInteger(offset) || offset < 0 || offset > 10_000_000)
        throw badRequest('offset must be a non-negative integer', [{ path: 'offset', message: 'is out of range' }]);
      return (await newestNodes(ctx, first, offset).load(s.id)).map(gqlNode);
    }),
    memoryCount: guarded((s: { id: string }, _: unknown, ctx: GqlContext) =>
      loader<string, number>(ctx, 'memoryCount', async (ids) => {
        const rows = await ctx.platform.db.prisma.memoryNode.groupBy({ by: ['stackId'], where: { stackId: { in: [...ids] } }, _count: { _all: true } });
        const m = new Map(rows.map((r) => [r.stackId, r._count._all]));
        return ids.map((id) => m.get(id) ?? 0);
      }).load(s.id),
    ),
  },
};
