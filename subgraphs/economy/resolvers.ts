// Economy subgraph resolvers: balances (sum over alive sleeves), emissions, claims and the faucet,
// through the economy domain (ledger.ts, treasury.ts, faucet.ts) the /v1 routes call.
import type { GqlContext } from '../../lib/graphql.ts';
import { guarded, health, loader, read } from '../../lib/graphql.ts';
import { holders } from './holders.ts';
import type { TokenAmounts } from './ledger.ts';
import { claim, claimableOf, emissionsById, issuance, issuanceOf, stackBalancesB, type CoreAmounts, type EmissionEvent } from './treasury.ts';
import { drip } from './faucet.ts';

/** Sum over each stack's alive sleeves: one query for any number of stacks. */
const stackBalances = (ctx: GqlContext) =>
  loader<string, TokenAmounts>(ctx, 'stackBalances', async (stackIds) => {
    const totals = await read(ctx, holders(ctx.platform).aliveSleeveTotalsRead(stackIds));
    return stackIds.map((id) => totals.get(id)!);
  });

const stackClaimable = (ctx: GqlContext) =>
  loader<string, CoreAmounts>(ctx, 'stackClaimable', async (stackIds) => {
    const claimable = await claimableOf(ctx.platform.db.prisma, [...stackIds], ctx.platform.epochs.current());
    return stackIds.map((id) => claimable.get(id)!);
  });

/** The newest `first` emissions of many stacks, computed in one query. */
const stackEmissions = (ctx: GqlContext, first: number) =>
  loader<string, EmissionEvent[]>(ctx, `stackEmissions:${first}`, async (stackIds) => {
    const lists = await issuanceOf(ctx.platform, ctx.platform.db.prisma, [...stackIds], first);
    return stackIds.map((id) => lists.get(id) ?? []);
  });

const emissionLoader = (ctx: GqlContext) => loader<string, EmissionEvent | null>(ctx, 'emission', (ids) => emissionsById(ctx.platform, ids));

const stackRef = (o: { stackId: string }) => ({ __typename: 'Stack', id: o.stackId });
const clampFirst = (first: number | undefined, max: number) => Math.min(Math.max(first ?? max, 0), max);

export const resolvers = {
  Mutation: {
    faucetDrip: guarded((_: unknown, a: { stackId: string }, ctx: GqlContext) => drip(ctx.platform, a.stackId)),
    claimEmissions: guarded((_: unknown, a: { stackId: string }, ctx: GqlContext) => claim(ctx.platform, a.stackId)),
  },
  Query: {
    balances: guarded(async (_: unknown, a: { stackId: string }, ctx: GqlContext) => ({
      stackId: a.stackId,
      ...(await stackBalancesB(ctx.platform, a.stackId)),
    })),
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
