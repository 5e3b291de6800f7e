// Sleeves subgraph resolvers: sleeves, Stack.sleeves, sagas (needlecast lives in this context);
// batched through DataLoader. Every mutation calls the sleeves domain the /v1 routes call.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader, read } from '../../lib/graphql.ts';
import { balancesOf, sleeveAccount, zeroAmounts, type TokenAmounts } from '../economy/index.ts';
import {
  decommissionSleeve,
  desyncedSleeves,
  getSleeveRow,
  spawnSleeve,
  stackTokenTotals,
  syncSleeve,
  sleevesByIdRead,
  sleevesOfStacksRead,
  sleeveView,
  type SleeveView,
  type SleeveViewRow,
} from './sleeves.ts';
import { sagaView, shapeA, shapeB, type SagaRow, type SagaView } from './needlecast/view.ts';
import { countAliveSleeves, driftLimits, stackBalanceHistory } from './inspect.ts';
import { callRouter, problemFromRouter, routerRequest, type GatewayNeedlecastRequest } from './needlecast/client.ts';

/** The sleeve read without its balances: Sleeve.tokens batches those (alive) or keeps the snapshot (decommissioned). */
const gqlSleeve = (r: SleeveViewRow): SleeveView => sleeveView(r, zeroAmounts());

/** Sleeves by id: one statement through the driver for a request's batch. */
const sleeveLoader = (ctx: GqlContext) =>
  loader<string, SleeveViewRow | null>(ctx, 'sleeve', async (ids) => byKey(ids, await read(ctx, sleevesByIdRead(ids)), (r) => r.id));

/** Every sleeve of each stack in spawn order: one statement for a request's batch of stacks. */
const sleevesOfStack = (ctx: GqlContext) =>
  loader<string, SleeveViewRow[]>(ctx, 'sleevesOfStack', async (stackIds) => {
    const rows = await read(ctx, sleevesOfStacksRead(stackIds));
    const byStack = new Map<string, SleeveViewRow[]>(stackIds.map((id) => [id, []]));
    for (const r of rows) {
      sleeveLoader(ctx).prime(r.id, r);
      byStack.get(r.stackId)?.push(r);
    }
    return stackIds.map((id) => byStack.get(id)!);
  });

/** Ledger balances of many sleeves in one query (economy's public ledger API). */
const sleeveBalances = (ctx: GqlContext) =>
  loader<string, TokenAmounts>(ctx, 'sleeveBalances', async (sleeveIds) => {
    const b = await balancesOf(ctx.platform.db.prisma, sleeveIds.map(sleeveAccount));
    return sleeveIds.map((id) => b.get(sleeveAccount(id)) ?? zeroAmounts());
  });

const sagaLoader = (ctx: GqlContext) =>
  loader<string, SagaRow | null>(ctx, 'saga', async (ids) =>
    byKey(ids, await ctx.platform.db.prisma.saga.findMany({ where: { id: { in: [...ids] } } }), (r) => r.id),
  );

const loadSleeve = async (ctx: GqlContext, id: string | null) => {
  if (!id) return null;
  const r = await sleeveLoader(ctx).load(id);
  return r && gqlSleeve(r);
};

const gqlSaga = (v: SagaView) => ({ ...v, id: v.sagaId });

/** Drops explicit nulls: the router reads an absent field and a null one alike. */
const present = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));

export const resolvers = {
  Mutation: {
    spawnSleeve: guarded(
      async (_: unknown, a: { stackId: string; embodimentType?: string; kind?: string; hostname?: string; tickRate?: number }, ctx: GqlContext) => {
        const input = present(a) as typeof a;
        const v = await spawnSleeve(ctx.platform, { ...input, shape: input.embodimentType !== undefined ? 'A' : 'B' });
        return gqlSleeve(await getSleeveRow(ctx.platform.db.prisma, v.id));
      },
    ),
    decommissionSleeve: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      await decommissionSleeve(ctx.platform, a.id, 'deleted');
      return gqlSleeve(await getSleeveRow(ctx.platform.db.prisma, a.id));
    }),
    syncSleeve: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const r = await syncSleeve(ctx.platform, a.id);
      return { ...r, sleeve: gqlSleeve(await getSleeveRow(ctx.platform.db.prisma, a.id)) };
    }),
    needlecast: guarded(async (_: unknown, a: { input: GatewayNeedlecastRequest }, ctx: GqlContext) => {
      const { body } = routerRequest(present(a.input as Record<string, unknown>));
      const { status, json } = await callRouter(ctx.platform, 'POST', '/needlecast', body);
      if (status >= 400) throw problemFromRouter(status, json);
      const view = json as unknown as SagaView;
      const A = shapeA(view);
      const B = shapeB(view);
      return { ...A, from: B.from, to: B.to, cost: view.cost, shardsTransferred: B.shardsTransferred, saga: gqlSaga(view) };
    }),
  },
  Query: {
    sleeve: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => loadSleeve(ctx, a.id)),
    sleeves: guarded(async (_: unknown, __: unknown, ctx: GqlContext) =>
      (await ctx.platform.db.prisma.sleeve.findMany({ where: { alive: true }, orderBy: { seq: 'asc' } })).map(gqlSleeve),
    ),
    saga: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const s = await sagaLoader(ctx).load(a.id);
      return s && gqlSaga(sagaView(s));
    }),
    desync: guarded(async (_: unknown, __: unknown, ctx: GqlContext) => desyncedSleeves(ctx.platform)),
    tokenBalances: guarded(async (_: unknown, a: { stackId: string }, ctx: GqlContext) => stackTokenTotals(ctx.platform, a.stackId)),
    aliveSleeveCount: guarded((_: unknown, __: unknown, ctx: GqlContext) => countAliveSleeves(ctx.platform)),
    driftLimits: (_: unknown, __: unknown, ctx: GqlContext) => driftLimits(ctx.platform),
    sleevesHealth: health('sleeves'),
  },
  Sleeve: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => loadSleeve(ctx, ref.id)),
    stack: (s: { stackId: string }) => ({ __typename: 'Stack', id: s.stackId }),
    tokens: guarded(async (s: SleeveView, _: unknown, ctx: GqlContext) => (s.alive ? sleeveBalances(ctx).load(s.id) : s.tokens)),
  },
  DesyncEntry: {
    sleeve: guarded(async (d: { id: string }, _: unknown, ctx: GqlContext) => loadSleeve(ctx, d.id)),
  },
  Stack: {
    __resolveReference: (ref: { id: string }) => ref,
    sleeves: guarded(async (s: { id: string }, _: unknown, ctx: GqlContext) => (await sleevesOfStack(ctx).load(s.id)).map(gqlSleeve)),
    balanceHistory: guarded((s: { id: string }, a: { last?: number }, ctx: GqlContext) => stackBalanceHistory(ctx.platform.db.prisma, s.id, a.last ?? 100)),
  },
  Saga: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => {
      const s = await sagaLoader(ctx).load(ref.id);
      return s && gqlSaga(sagaView(s));
    }),
    stack: (s: { stackId: string }) => ({ __typename: 'Stack', id: s.stackId }),
    fromSleeve: guarded(async (s: SagaView, _: unknown, ctx: GqlContext) => loadSleeve(ctx, s.from)),
    toSleeve: guarded(async (s: SagaView, _: unknown, ctx: GqlContext) => loadSleeve(ctx, s.to)),
  },
};
