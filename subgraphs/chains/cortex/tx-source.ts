// The Cortex transactions of an epoch as the outbox recorded them: database only (no ethers), so the
// Thalamus and the residue proofs can read them without loading the EVM client.
import type { Platform } from '../../../lib/platform.ts';

/**
 * Thalamus's evmRoot source: hashes (64 lowercase hex) of the confirmed Cortex transactions to the
 * suite whose intent belongs to the epoch, in nonce order (the order the operator sent them).
 */
export function cortexTxSource(p: Pick<Platform, 'db'>) {
  const db = p.db.prisma;
  return {
    async txHashesForEpoch(epoch: number): Promise<string[]> {
      const rows = await db.chainOutbox.findMany({ where: { epoch, status: 'confirmed' }, orderBy: { nonce: 'asc' }, select: { txHash: true } });
      return rows.map((r) => r.txHash!).filter(Boolean);
    },
    /**
     * Intents of the epoch not settled yet (a fold may wait for them): its open ChainOutbox rows and
     * its ledger rows not in a settlement yet (a settled one is its settle row, counted by that row's
     * epoch, the newest of its rows').
     */
    async outstandingForEpoch(epoch: number): Promise<number> {
      const [{ n }] = await db.$queryRaw<{ n: number }[]>`
        SELECT (SELECT count(*) FROM "ChainOutbox" WHERE epoch = ${epoch} AND status IN ('pending', 'submitted'))::int
          + (SELECT count(*) FROM "ChainLedgerIntent" WHERE status = 'pending' AND epoch = ${epoch})::int AS n`;
      return n;
    },
  };
}
