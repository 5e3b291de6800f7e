// Cortex transaction intents. A context that mirrors a change on-chain calls enqueueChainTx inside
// the same database transaction as the change; the Cortex submitter (cortex/submitter.ts) sends,
// confirms and re-sends them, so a 4 s block never stalls a request. A ledger mint or burn is one
// row here too, but it is not sent alone: the submitter settles the ledger rows of each ended
// epoch as their net per stack and token (cortex/settlement.ts).
import { sql, sqlIdent, type Tx } from '../../lib/db/index.ts';
import type { StatementPart } from '../../lib/db/statement.ts';
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

type Intent = { kind: ChainTxKind; ref: string; payload: Record<string, unknown>; epoch?: number };

/** Kinds whose intents mirror no record (a ledger row): a part may write them without a record's owner. */
const RECORDLESS: ReadonlySet<ChainTxKind> = new Set(['mint', 'burn']);

/**
 * Intents of kinds that mirror no record (mint, burn: the ledger rows the submitter settles), as
 * part of a composed statement (lib/db/statement.ts): one INSERT, in order. Other kinds go through
 * enqueueChainTx, which also marks their record pending.
 */
export function chainIntentsPart(intents: readonly Intent[], name = 'chain_intents'): StatementPart | null {
  if (!intents.length) return null;
  for (const i of intents) if (!RECORDLESS.has(i.kind)) throw new Error(`chainIntentsPart: ${i.kind} mirrors a record; use enqueueChainTx`);
  const rows = intents.map((i) => ({ kind: i.kind, ref: i.ref, payload: i.payload, epoch: i.epoch ?? null }));
  return {
    ctes: [
      {
        name,
        body: sql`INSERT INTO "ChainOutbox" (kind, ref, payload, epoch, "updatedAt")
          SELECT r.kind, r.ref, r.payload, r.epoch, now()
          FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS (kind text, ref text, payload jsonb, epoch int))
            WITH ORDINALITY AS r(kind, ref, payload, epoch, n)
          ORDER BY r.n`,
      },
    ],
  };
}

/**
 * enqueueCoalescedChainTx as part of a composed statement: the waiting intent of its kind for `ref`
 * rewritten in place, else a new one. The record it mirrors must be marked pending in the same
 * statement by its owner (markPending's rule: a new intent makes its record pending; while one
 * waits the record is pending already), who updates that row there anyway: a statement may change a
 * row only once. `name` prefixes the part's CTEs.
 */
export function coalescedChainIntentPart(intent: Intent, name: string): StatementPart {
  const payload = JSON.stringify(intent.payload);
  return {
    ctes: [
      {
        name: `${name}_waiting`,
        body: sql`UPDATE "ChainOutbox" SET payload = ${payload}::jsonb, "updatedAt" = now()
          WHERE kind = ${intent.kind} AND ref = ${intent.ref} AND status = 'pending' RETURNING id`,
      },
      {
        name: `${name}_new`,
        body: sql`INSERT INTO "ChainOutbox" (kind, ref, payload, epoch, "updatedAt")
          SELECT ${intent.kind}, ${intent.ref}, ${payload}::jsonb, ${intent.epoch ?? null}::int, now()
          WHERE NOT EXISTS (SELECT 1 FROM ${sqlIdent(`${name}_waiting`)})`,
      },
    ],
  };
}
