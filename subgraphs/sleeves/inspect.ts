// What an inspector reads about sleeves as a whole: how many are alive, and the drift lines a
// sleeve is flagged above (the drift maximum) and desynced above (twice it), from the config the
// drift-checker and the watchdog use.
import type { Platform } from '../../lib/platform.ts';
import type { Db, Tx } from '../../lib/db/index.ts';
import { balanceHistoryOf, poolAccount, sleeveAccount, type TokenAmounts } from '../economy/index.ts';
import { getStackRow } from '../stacks/index.ts';

export const countAliveSleeves = (p: Platform): Promise<number> => p.db.prisma.sleeve.count({ where: { alive: true } });

export const driftLimits = (p: Platform): { flag: number; desync: number } => ({ flag: p.config.driftMax, desync: 2 * p.config.driftMax });

/** The ids of every sleeve a stack has had, alive or not (its ledger accounts over time). */
export async function sleeveIdsOfStack(db: Db | Tx, stackId: string): Promise<string[]> {
  return (await db.sleeve.findMany({ where: { stackId }, select: { id: true } })).map((s) => s.id);
}

/** A stack's raw balances (its pool and every sleeve it has had) at the end of each epoch they changed in. */
export async function stackBalanceHistory(db: Db, stackId: string, last: number): Promise<{ epoch: number; raw: TokenAmounts }[]> {
  await getStackRow(db, stackId); // 404 for an unknown stack
  const accounts = [poolAccount(stackId), ...(await sleeveIdsOfStack(db, stackId)).map(sleeveAccount)];
  return balanceHistoryOf(db, accounts, last);
}
