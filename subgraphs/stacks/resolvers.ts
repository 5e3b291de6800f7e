// Stacks subgraph resolvers: identity records, batched through DataLoader. Creation and reads call
// the stacks domain (subgraphs/stacks/stacks.ts), the same functions the /v1 REST routes call.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader, read } from '../../lib/graphql.ts';
import {
  createStack,
  getStackRow,
  lastActiveEpochsOf,
  stacksByIdRead,
  stacksInTokenOrderRead,
  type CreateStackInput,
  type StackListRow,
  type StackRow,
} from './stacks.ts';
import { pageStacks, type StackPageInput } from './list.ts';

/** The economy's lastActiveEpoch of many stacks, one query (asked only when a query selects the field). */
function lastActiveLoader(ctx: GqlContext) {
  return loader<string, number>(ctx, 'stackLastActive', async (ids) => {
    const last = await lastActiveEpochsOf(ctx.platform.db.prisma, ids);
    return ids.map((id) => last.get(id)!);
  });
}

/** Stacks by id, one statement through the driver for a request's batch. */
function stackLoader(ctx: GqlContext) {
  return loader<string, StackListRow | StackRow | null>(ctx, 'stack', async (ids) => byKey(ids, await read(ctx, stacksByIdRead(ids)), (r) => r.id));
}

const iso = (d: Date | string) => (typeof d === 'string' ? d : d.toISOString());

function gqlStack(r: StackListRow | StackRow) {
  return {
    id: r.id,
    tokenId: r.tokenId,
    name: r.name,
    kind: r.kind,
    pubKey: r.pubKey,
    pubkey: r.pubKey,
    epoch: r.epoch,
    episodicHead: r.episodicHead,
    cpv: { syncCoeff: r.syncCoeff, memoryCoeff: r.memoryCoeff, computeCoeff: r.computeCoeff, residueCoeff: r.residueCoeff, routingCoeff: r.routingCoeff },
    binding: { floor: r.bindingFloor, decayRate: r.bindingDecay },
    createdAt: iso(r.createdAt),
    chainStatus: r.chainStatus,
  };
}

/** GraphQL passes absent optional fields as undefined and explicit nulls as null: the domain reads both as absent. */
function present<T extends Record<string, unknown>>(o: T | null | undefined): Partial<T> {
  const out: Partial<T> = {};
  if (o) for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

type CreateArgs = CreateStackInput & { input?: CreateStackInput | null };

export const resolvers = {
  Mutation: {
    createStack: guarded(async (_: unknown, a: CreateArgs, ctx: GqlContext) => {
      const { input, ...flat } = a;
      const body = { ...present(flat as Record<string, unknown>), ...present((input ?? {}) as Record<string, unknown>) } as CreateStackInput;
      if (body.cpv) body.cpv = present(body.cpv as Record<string, unknown>);
      const created = await createStack(ctx.platform, body);
      return { stack: gqlStack(await getStackRow(ctx.platform.db.prisma, created.id)), identityPriv: created.identityPriv ?? null };
    }),
  },
  Query: {
    stack: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const r = await stackLoader(ctx).load(a.id);
      return r && gqlStack(r);
    }),
    stacks: guarded(async (_: unknown, a: { first: number }, ctx: GqlContext) => {
      const first = Math.min(Math.max(a.first ?? 100, 0), 1000);
      const rows = await read(ctx, stacksInTokenOrderRead(first));
      for (const r of rows) stackLoader(ctx).prime(r.id, r);
      return rows.map(gqlStack);
    }),
    stackPage: guarded(async (_: unknown, a: StackPageInput, ctx: GqlContext) => {
      const { total, rows } = await pageStacks(ctx.platform.db.prisma, a);
      for (const r of rows) stackLoader(ctx).prime(r.id, r);
      return { total, stacks: rows.map(gqlStack) };
    }),
    stacksHealth: health('stacks'),
  },
  Stack: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => {
      const r = await stackLoader(ctx).load(ref.id);
      return r && gqlStack(r);
    }),
    head: (s: { episodicHead: string | null }) => (s.episodicHead ? { __typename: 'MemoryNode', cid: s.episodicHead } : null),
    lastActiveEpoch: guarded((s: { id: string }, _: unknown, ctx: GqlContext) => lastActiveLoader(ctx).load(s.id)),
  },
};
