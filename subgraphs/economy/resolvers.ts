// Economy subgraph resolvers: balances (sum over alive sleeves) and emissions.
import type { GqlContext } from '../../lib/graphql.ts';
import { guarded, health, loader } from '../../lib/graphql.ts';
import { balancesOf, sleeveAccount, zeroAmounts, TOKENS, type TokenAmounts } from './ledger.ts';

const stackBalances = (ctx: GqlContext) =>
  loader<string, TokenAmounts>(ctx, 'stackBalances', async (stackIds) => {
    const sleeves = await ctx.platform.db.prisma.sleeve.findMany({ where: { stackId: { in: [...stackIds] }, alive: true }, select: { id: true, stackId: true } });
    const bal = await balancesOf(ctx.platform.db.prisma, sleeves.map((s) => sleeveAccount(s.id)));
    return stackIds.map((id) => {
      const sum = zeroAmounts();
      for (const s of sleeves) if (s.stackId === id) for (const t of TOKENS) sum[t] += bal.get(sleeveAccount(s.id))![t];
      return sum;
    });
  });

export const resolvers = {
  Query: { economyHealth: health('economy') },
  Stack: {
    __resolveReference: (ref: { id: string }) => ref,
    balances: guarded((s: { id: string }, _: unknown, ctx: GqlContext) => stackBalances(ctx).load(s.id)),
  },
  Emission: {
    __resolveReference: guarded(async (ref: { id: string }, ctx: GqlContext) => ctx.platform.db.prisma.emission.findUnique({ where: { id: ref.id } })),
  },
};
