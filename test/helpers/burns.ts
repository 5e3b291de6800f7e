// What a burn writes, checked the same way wherever a path burns (a recall's spend, a sync): the
// two ledger legs of one posting (the debit, then the burn account's credit) and the pending burn
// intent the Cortex mirror settles.
import { expect } from 'vitest';
import type { Database } from '../../lib/db/index.ts';
import { sleeveAccount } from '../../subgraphs/economy/ledger.ts';

export async function expectBurned(
  db: Database,
  b: { reason: string; sleeveId: string; stackId: string; token: string; milli: bigint; epoch: number },
): Promise<void> {
  const entries = await db.prisma.ledgerEntry.findMany({ where: { reason: b.reason, ref: b.sleeveId }, orderBy: { id: 'asc' } });
  expect(entries.map((e) => [e.account, e.token, e.milli, e.epoch])).toEqual([
    [sleeveAccount(b.sleeveId), b.token, -b.milli, b.epoch],
    ['burn', b.token, b.milli, b.epoch],
  ]);
  expect(entries[0]!.txId).toBe(entries[1]!.txId);
  const intent = await db.prisma.chainLedgerIntent.findFirstOrThrow({ where: { kind: 'burn', ref: `ledger:${entries[0]!.txId}` } });
  expect(intent).toMatchObject({
    status: 'pending',
    epoch: b.epoch,
    settlementId: null,
    payload: { stackId: b.stackId, amounts: [{ token: b.token, milli: b.milli.toString() }] },
  });
}
