// Economy subgraph resolvers: balances (sum over alive sleeves), emissions, claims and the faucet,
// through the economy domain (ledger.ts, treasury.ts, faucet.ts) the /v1 routes call.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';
import { aliveSleeveTotals } from '../sleeves/index.ts';
import { balancesOf, claimableAccount, zeroAmounts, CORE_TOKENS, type TokenAmounts } from './ledger.ts';
import { claim, emissionView, issuance, stackBalancesB, type CoreAmounts, type EmissionEvent } from './treasury.ts';
import { drip } from './faucet.ts';

type EmissionRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['emission']['findUnique']>>>;

/** Sum over each stack's alive sleeves: one query for any number of stacks. */
const stackBalances = (ctx: GqlContext) =>
  loader<string, TokenAmounts>(ctx, 'stackBalances', async (stackIds) => {
    const totals = await aliveSleeveTotals(ctx.platform.db.prisma, stackIds);
    return stackIds.map((id) => totals.get(id)!);
  });

const core = (b: TokenAmounts): CoreAmounts => Object.fromEntries(CORE_TOKENS.map((t) => [t, b[t]])) as CoreAmounts;

const stackClaimable = (ctx: GqlContext) =>
  loader<string, CoreAmounts>(ctx, 'stackClaimable', async (stackIds) => {
    const bal = await balancesOf(ctx.platform.db.prisma, stackIds.map(claimableAccount));
    return stackIds.map((id) => core(bal.get(claimableAccount(id)) ?? zeroAmounts()));
  });

/** The newest `first` emissions of many stacks in one query (a window function per stack). */
const stackEmissions = (ctx: GqlContext, first: number) =>
  loader<string, EmissionEvent[]>(ctx, `stackEmissions:${first}`, async (stackIds) => {
    const rows = await ctx.platform.db.prisma.$queryRaw<EmissionRow[]>`
      SELECT id, "stackId", epoch, amounts, cpv, "ebcFactor", "createdAt" FROM (
        SELECT *, row_number() OVER (PARTITION BY "stackId" ORDER BY epoch DESC) AS rn
        FROM "Emission" WHERE "stackId" = ANY(${[...stackIds]})
      ) t WHERE rn <= ${first} ORDER BY epoch DESC`;
    // Raw rows: normalise what a driver may hand back as text.
    const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);
    const views = rows.map((r) => emissionView({ ...r, amounts: json(r.amounts), cpv: json(r.cpv), createdAt: new Date(r.createdAt) }));
    return stackIds.map((id) => views.filter((v) => v.stackId === id));
  });

const emissionLoader = (ctx: GqlContext) =>
  loader<string, EmissionEvent | null>(ctx, 'emission', async (ids) =>
    byKey(ids, (await ctx.platform.db.prisma.emission.findMany({ where: { id: { in: [...ids] } } })).map(emissionView), (v) => v.id),
  );

const stackRef = (o: { stackId: string }) => ({ __typename: 'Stack', id: o.stackId });
const clampFirst = (first: number | undefined, max: number) => Math.min(Math.max(first ?? max, 0), max);

export const resolvers = {
  Mutation: {
    faucetDrip: guarded((_: unknown, a: { stackId: string }, ctx: GqlContext) => drip(ctx.platform, a.stackId)),
    claimEmissions: guarded((_: unknown, a: { stackId: string }, ctx: GqlContext) => claim(ctx.platform, a.stackId)),
  },
  Query: {
    balances: guarded(async (_: unknown, a: { stackId: string }, ctx: GqlContext) => ({ stackId: a.stackId, ...(await stackBalancesB(ctx.platform, a.stackId)) })),
    issuance: guarded((_: unknown, a: { stackId: string; first?: number }, ctx: GqlContext) => issuance(ctx.platform, a.stackId, clampFirst(a.first, 100))),
    economyHealth: health('economy'),
  },
  ClaimResult: { stack: stackRef },
  Stack: {
    __resolveReference: (ref: { id: string }) => ref,
    balances: guarded((s: { id: string }, _: unknown, ctx: GqlContext) => stackBalances(ctx).load(s.id)),
    claimable: guarded((s: { id: string }, _: unknown, ctx: GqlContext) => stackClaimable(ctx).load(s.id)),
    emissions: guarded((s: { id: string }, a: { first?: number }, ctx: GqlContext) => stackEmissions(ctx, clampFirst(a.first, 100)).load(s.id)),
  },
  Emission: {
    __resolveReference: guarded((ref: { id: string }, ctx: GqlContext) => emissionLoader(ctx).load(ref.id)),
    stack: stackRef,
  },
};
