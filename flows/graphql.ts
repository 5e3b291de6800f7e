// GraphQL resolvers of the flows: fields of a subgraph whose answer spans contexts. The router
// merges them into the subgraph they belong to (router/subgraphs.ts), so a context's own resolvers
// never reach above it.
import { guarded, loader, type GqlContext } from '../lib/graphql.ts';
import type { StackAnchor } from '../subgraphs/chains/index.ts';
import { perceive, remember } from './memory.ts';
import { recall } from './recall.ts';
import { anchorsOfStacks } from './stack-reads.ts';

const ref = (__typename: string, key: string, value: string | null | undefined) => (value ? { __typename, [key]: value } : null);
const opt = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

export const flowResolvers: Record<string, Record<string, Record<string, unknown>>> = {
  memory: {
    Mutation: {
      perceive: guarded(async (_: unknown, a: { sleeveId: string; stackId?: string; text: string }, ctx: GqlContext) => {
        const r = await perceive(ctx.platform, { sleeveId: a.sleeveId, stackId: opt(a.stackId), text: a.text });
        return Object.assign(r, { sleeve: ref('Sleeve', 'id', r.sleeveId) }); // onto the fresh result: no spread copy (docs/decisions.md)
      }),
      remember: guarded(async (_: unknown, a: { stackId?: string; sleeveId?: string; text: string; pin?: boolean }, ctx: GqlContext) => {
        const r = await remember(ctx.platform, { stackId: opt(a.stackId), sleeveId: opt(a.sleeveId), text: a.text, pin: opt(a.pin) });
        return { cid: r.cid, epoch: r.epoch, sleeveId: r.sleeveId };
      }),
      recall: guarded(async (_: unknown, a: { stackId: string; depth: number; sleeveId?: string; memoryToken?: number }, ctx: GqlContext) => {
        const r = await recall(ctx.platform, { stackId: a.stackId, depth: a.depth, sleeveId: opt(a.sleeveId), memoryToken: opt(a.memoryToken) });
        return {
          fragments: r.fragments.map((f) => ({ cid: f.node.cid, text: f.text, epoch: f.node.epoch })),
          broken: r.broken,
          brokenCount: r.broken.length,
          fidelity: r.fidelity,
          cost: r.cost,
          effectiveDepth: r.effectiveDepth,
          sleeveId: r.sleeveId,
          residue: ref('Residue', 'id', r.residueId),
        };
      }),
    },
  },
  stacks: {
    Stack: {
      // The same anchors as the REST read, batched over the stacks of a request.
      anchors: guarded(async (s: { id: string }, _: unknown, ctx: GqlContext) =>
        loader<string, StackAnchor[]>(ctx, 'stack-anchors', async (ids) => {
          const m = await anchorsOfStacks(ctx.platform.db.prisma, ids);
          return ids.map((id) => m.get(id) ?? []);
        }).load(s.id),
      ),
    },
  },
};
