// Balances over epochs, from the ledger: what a set of accounts held together at the end of each
// epoch in which any of them changed. The newest `last` such epochs, oldest first. (Which accounts
// make up a stack is the sleeves context's to say: it asks with the pool and every sleeve account.)
import type { Db } from '../../lib/db/index.ts';
import { badRequest } from '../../lib/errors.ts';
import { fromMilli, zeroAmounts, TOKENS, type Token, type TokenAmounts } from './ledger.ts';

export const HISTORY_MAX = 500;

export async function balanceHistoryOf(db: Db, accounts: string[], last: number): Promise<{ epoch: number; raw: TokenAmounts }[]> {
  if (!Number.isInteger(last) || last < 1 || last > HISTORY_MAX)
    throw badRequest(`last must be an integer from 1 to ${HISTORY_MAX}`, [{ path: 'last', message: 'is out of range' }]);
  const rows = await db.ledgerEntry.groupBy({ by: ['epoch', 'token'], where: { account: { in: accounts } }, _sum: { milli: true }, orderBy: { epoch: 'asc' } });
  const running = new Map<Token, bigint>(TOKENS.map((t) => [t, 0n]));
  const points: { epoch: number; raw: TokenAmounts }[] = [];
  for (const r of rows) {
    if (!(TOKENS as readonly string[]).includes(r.token)) continue;
    running.set(r.token as Token, running.get(r.token as Token)! + (r._sum.milli ?? 0n));
    const raw = zeroAmounts();
    for (const t of TOKENS) raw[t] = fromMilli(running.get(t)!);
    if (points.at(-1)?.epoch === r.epoch) points[points.length - 1] = { epoch: r.epoch, raw };
    else points.push({ epoch: r.epoch, raw });
  }
  return points.slice(-last);
}
