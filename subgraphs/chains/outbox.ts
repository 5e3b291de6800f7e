// Cortex transaction intents. A context that mirrors a change on-chain calls enqueueChainTx inside
// the same database transaction as the change; the Cortex submitter (cortex/submitter.ts) sends,
// confirms and re-sends them, so a 4 s block never stalls a request. A ledger mint or burn is one
// row here too, but it is not sent alone: the submitter settles the ledger rows of each ended
// epoch as their net per stack and token (cortex/settlement.ts).
import { sql, type Sql, type Tx } from '../../lib/db/index.ts';
import { markPending } from './cortex/records.ts';

export type ChainTxKind =
  | 'mintIdentity'
  | 'updateStack'
  | 'spawnSleeve'
  | 'decommissionSleeve'
  | 'mint'
  | 'burn'
  | 'anchor'
  | 'route'
  | 'openResidue'
  | 'claimResidue'
  | 'emission'
  // ERC-8004 ValidationRegistry: an accepted residue proof, requested then answered by the platform.
  | 'validationRequest'
  | 'validationResponse'
  // The net of the ledger's mints and burns over an epoch (written by the Cortex submitter only).
  | 'settle';

export async function enqueueChainTx(tx: Tx, intent: { kind: ChainTxKind; ref: string; payload: Record<string, unknown>; epoch?: number }): Promise<void> {
  await tx.chainOutbox.create({ data: { kind: intent.kind, ref: intent.ref, payload: intent.payload as never, epoch: intent.epoch } });
  await markPending(tx, intent.kind, intent.payload);
}

/**
 * enqueueChainTx as the SELECT of an INSERT in a statement the caller composes (one row for each row
 * of `source`, a CTE of that statement): the same row, for a kind without a mirrored record (a
 * ledger mint or burn: markPending writes nothing for them). A read's spend uses it (recall: one
 * statement through the driver, sleeves' spendForRead).
 */
export function chainIntentInsert(source: Sql, intent: { kind: 'mint' | 'burn'; ref: string; payload: Record<string, unknown>; epoch: number }): Sql {
  return sql`INSERT INTO "ChainOutbox" (kind, ref, payload, epoch, "updatedAt")
    SELECT ${intent.kind}, ${intent.ref}, ${JSON.stringify(intent.payload)}::jsonb, ${intent.epoch}::int, now() FROM ${source}`;
}

/**
 * An intent that supersedes the last one of its kind for `ref` (a stack's head and epoch on the
 * identity NFT): while one is still waiting in the outbox it is rewritten in place, so a burst of
 * changes costs one Cortex transaction, not one each.
 */
export async function enqueueCoalescedChainTx(
  tx: Tx,
  intent: { kind: ChainTxKind; ref: string; payload: Record<string, unknown>; epoch?: number },
): Promise<void> {
  const waiting = await tx.chainOutbox.updateMany({
    where: { kind: intent.kind, ref: intent.ref, status: 'pending' },
    data: { payload: intent.payload as never },
  });
  if (waiting.count === 0) await enqueueChainTx(tx, intent);
}
