// The chain side of mirrored records. The outbox owns the chainStatus columns of Stack, Sleeve,
// Residue and EpochAnchor (documented exception to "never another context's tables"): a record is
// pending while any of its intents is outstanding, then confirmed, or failed when its last one reverted.
import type { Db, Tx } from '../../../lib/db/index.ts';

type RecordRef =
  | { table: 'stack'; id: string; kinds: string[]; key: 'stackId' }
  | { table: 'sleeve'; id: string; kinds: string[]; key: 'sleeveId' }
  | { table: 'residue'; id: string; kinds: string[]; key: 'residueId' }
  | { table: 'anchor'; id: number; kinds: string[]; key: 'epoch' };

export type ChainStatus = 'pending' | 'confirmed' | 'failed';

export function recordOf(kind: string, payload: Record<string, unknown>): RecordRef | undefined {
  const s = (k: string) => (typeof payload[k] === 'string' ? (payload[k] as string) : undefined);
  switch (kind) {
    case 'mintIdentity':
    case 'updateStack':
      return s('stackId') ? { table: 'stack', id: s('stackId')!, kinds: ['mintIdentity', 'updateStack'], key: 'stackId' } : undefined;
    case 'spawnSleeve':
    case 'decommissionSleeve':
      return s('sleeveId') ? { table: 'sleeve', id: s('sleeveId')!, kinds: ['spawnSleeve', 'decommissionSleeve'], key: 'sleeveId' } : undefined;
    case 'openResidue':
    case 'claimResidue':
    case 'validationRequest':
    case 'validationResponse':
      return s('residueId')
        ? { table: 'residue', id: s('residueId')!, kinds: ['openResidue', 'claimResidue', 'validationRequest', 'validationResponse'], key: 'residueId' }
        : undefined;
    case 'anchor':
      return Number.isSafeInteger(payload.epoch) ? { table: 'anchor', id: payload.epoch as number, kinds: ['anchor'], key: 'epoch' } : undefined;
    default:
      return undefined;
  }
}

async function write(tx: Tx, r: RecordRef, status: ChainStatus, txHash?: string): Promise<void> {
  switch (r.table) {
    case 'stack':
      await tx.stack.updateMany({ where: { id: r.id }, data: { chainStatus: status } });
      return;
    case 'sleeve':
      await tx.sleeve.updateMany({ where: { id: r.id }, data: { chainStatus: status } });
      return;
    case 'residue':
      await tx.residue.updateMany({ where: { id: r.id }, data: { chainStatus: status } });
      return;
    case 'anchor':
      await tx.epochAnchor.updateMany({ where: { epoch: r.id }, data: txHash ? { chainStatus: status, txHash } : { chainStatus: status } });
  }
}

/** A new intent makes its record pending again (called by enqueueChainTx, in the caller's transaction). */
export async function markPending(tx: Tx, kind: string, payload: Record<string, unknown>): Promise<void> {
  if (kind === 'mintIdentity' || kind === 'spawnSleeve' || kind === 'openResidue') return; // created pending
  const r = recordOf(kind, payload);
  if (r) await write(tx, r, 'pending');
}

/** Its chain side is outstanding again (the chain lost the block that held it). */
export async function markRecordPending(tx: Tx, kind: string, payload: Record<string, unknown>): Promise<void> {
  const r = recordOf(kind, payload);
  if (r) await write(tx, r, 'pending');
}

/** After an intent settles: confirmed/failed unless another intent of the record is still outstanding. */
export async function settleRecord(tx: Tx, kind: string, payload: Record<string, unknown>, outcome: 'confirmed' | 'failed', txHash?: string): Promise<void> {
  const r = recordOf(kind, payload);
  if (!r) return;
  const outstanding = await tx.chainOutbox.count({
    where: { kind: { in: r.kinds }, status: { in: ['pending', 'submitted'] }, payload: { path: [r.key], equals: r.id } },
  });
  await write(tx, r, outstanding > 0 ? 'pending' : outcome, txHash);
}

/**
 * settleRecord in its own short transaction that never waits for a writer holding the record's row
 * (a perceive holds its stack's row until it commits; the submitter settling every stack's
 * updateStack in one transaction queued behind each of them in turn). False when the row is busy:
 * nothing was written and the caller tries again later.
 */
export async function trySettleRecord(
  db: Db,
  kind: string,
  payload: Record<string, unknown>,
  outcome: 'confirmed' | 'failed',
  txHash?: string,
): Promise<boolean> {
  const r = recordOf(kind, payload);
  if (!r) return true;
  return db.$transaction(async (tx) => {
    const mine =
      r.table === 'stack'
        ? await tx.$queryRaw<unknown[]>`SELECT 1 FROM "Stack" WHERE id = ${r.id} FOR UPDATE SKIP LOCKED`
        : r.table === 'sleeve'
          ? await tx.$queryRaw<unknown[]>`SELECT 1 FROM "Sleeve" WHERE id = ${r.id} FOR UPDATE SKIP LOCKED`
          : r.table === 'residue'
            ? await tx.$queryRaw<unknown[]>`SELECT 1 FROM "Residue" WHERE id = ${r.id} FOR UPDATE SKIP LOCKED`
            : await tx.$queryRaw<unknown[]>`SELECT 1 FROM "EpochAnchor" WHERE epoch = ${r.id} FOR UPDATE SKIP LOCKED`;
    if (!mine.length) {
      // Skipped: busy, or no such row (then there is nothing to write).
      const exists =
        r.table === 'stack'
          ? await tx.stack.count({ where: { id: r.id } })
          : r.table === 'sleeve'
            ? await tx.sleeve.count({ where: { id: r.id } })
            : r.table === 'residue'
              ? await tx.residue.count({ where: { id: r.id } })
              : await tx.epochAnchor.count({ where: { epoch: r.id } });
      return exists === 0;
    }
    await settleRecord(tx, kind, payload, outcome, txHash);
    return true;
  });
}
