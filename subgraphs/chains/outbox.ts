// Cortex transaction intents. A context that mirrors a change on-chain calls enqueueChainTx inside
// the same database transaction as the change; the Cortex submitter (cortex/submitter.ts) sends,
// confirms and re-sends them, so a 4 s block never stalls a request. A ledger mint or burn is an
// intent too, but it is not sent alone and is not a ChainOutbox row: it goes to ChainLedgerIntent,
// and the submitter settles the ledger rows of each ended epoch as their net per stack and token
// (cortex/settlement.ts).
import { sql, sqlIdent, type Sql, type Tx } from '../../lib/db/index.ts';
import type { StatementPart } from '../../lib/db/statement.ts';
import { CREATED_PENDING, markPending, recordOf, recordRefOf } from './cortex/records.ts';

export type ChainTxKind =
  | 'mintIdentity'
  | 'updateStack'
  | 'spawnSleeve'
  | 'decommissionSleeve'
  | 'mint'
  | 'burn'
  // The burns of a group commit over several stacks, one row (`{ stacks: [{ stackId, amounts }] }`,
  // each stack's amounts summed): split into per-stack burn rows before each settlement.
  | 'burns'
  | 'anchor'
  | 'route'
  | 'openResidue'
  | 'claimResidue'
  | 'emission'
  // ERC-8004 ValidationRegistry: an accepted residue proof, requested then answered by the platform.
  | 'validationRequest'
  | 'validationResponse'
  // The net of the ledger's mints and burns over an epoch (written by the Cortex submitter only).
  | 'settle'
  // The heads that moved since the last mirror, many stacks in one call (written by the Cortex
  // submitter only, once an epoch: cortex/heads.ts).
  | 'updateStacks';

type Intent = { kind: ChainTxKind; ref: string; payload: Record<string, unknown>; epoch?: number };

/** The intent kinds that are ledger rows (ChainLedgerIntent: settled by net effect, never sent one by one). */
const LEDGER_KINDS = ['mint', 'burn', 'burns'] as const;
const isLedgerKind = (kind: string) => (LEDGER_KINDS as readonly string[]).includes(kind);

/** The record an intent mirrors, if any; its intents carry its ref (cortex/records.ts finds the outstanding ones on the ref index). */
function checkedRecord(caller: string, intent: Intent) {
  const record = recordOf(intent.kind, intent.payload);
  if (record && intent.ref !== recordRefOf(record))
    throw new Error(`${caller}: a ${intent.kind} intent's ref must be ${recordRefOf(record)}, not ${intent.ref}`);
  return record;
}

export async function enqueueChainTx(tx: Tx, intent: Intent): Promise<void> {
  checkedRecord('enqueueChainTx', intent);
  if (isLedgerKind(intent.kind)) {
    await tx.chainLedgerIntent.create({ data: { kind: intent.kind, ref: intent.ref, payload: intent.payload as never, epoch: intent.epoch } });
    return;
  }
  await tx.chainOutbox.create({ data: { kind: intent.kind, ref: intent.ref, payload: intent.payload as never, epoch: intent.epoch } });
  await markPending(tx, intent.kind, intent.payload);
}

/**
 * Intents that mirror no record (mint, burn: the ledger rows the submitter settles; an epoch's
 * emission), as part of a composed statement (lib/db/statement.ts): one INSERT a table, each in
 * order. An intent that mirrors a record goes through enqueueChainTx, which also marks the record
 * pending.
 */
export function chainIntentsPart(intents: readonly Intent[], name = 'chain_intents'): StatementPart | null {
  if (!intents.length) return null;
  for (const i of intents) if (recordOf(i.kind, i.payload)) throw new Error(`chainIntentsPart: ${i.kind} mirrors a record; use enqueueChainTx`);
  const ledger = intents.filter((i) => isLedgerKind(i.kind));
  const sent = intents.filter((i) => !isLedgerKind(i.kind));
  const ctes = [];
  if (ledger.length) ctes.push({ name: sent.length ? `${name}_ledger` : name, body: insertIntents('ChainLedgerIntent', ledger) });
  if (sent.length) ctes.push({ name, body: insertIntents('ChainOutbox', sent) });
  return { ctes };
}

/**
 * The intents of records the same statement creates, as part of it: one `kind` intent (a
 * ChainOutbox row) for each row of `rows`, a SELECT over the statement's CTEs with the columns ref
 * (the record's id), payload (jsonb) and epoch (int). A new record is pending already (nothing to
 * mark, as newRecordIntentPart).
 */
export function newRecordsIntentPart(kind: (typeof CREATED_PENDING)[number], rows: Sql, name: string): StatementPart {
  if (!CREATED_PENDING.includes(kind)) throw new Error(`newRecordsIntentPart: ${kind} records are not created pending`);
  return intentsFromRowsPart(kind, sql`(${rows})`, name);
}

/** The intent kinds whose payload a statement may compute (computedIntentsPart): sent alone, mirroring no record. */
const COMPUTED_KINDS = ['emission'] as const;

/**
 * Intents whose payloads the same statement computes, as part of it: one `kind` intent (a
 * ChainOutbox row) for each row of the statement's CTE `from`, whose columns are ref (text),
 * payload (jsonb) and epoch (int).
 */
export function computedIntentsPart(kind: (typeof COMPUTED_KINDS)[number], from: string, name = 'chain_intents'): StatementPart {
  if (!COMPUTED_KINDS.includes(kind)) throw new Error(`computedIntentsPart: ${kind} is not computed`);
  return intentsFromRowsPart(kind, sqlIdent(from), name);
}

/** One `kind` intent (a ChainOutbox row) for each row of `from` (a CTE or a subquery with the columns ref, payload, epoch). */
function intentsFromRowsPart(kind: string, from: Sql, name: string): StatementPart {
  return {
    ctes: [
      { name, body: sql`INSERT INTO "ChainOutbox" (kind, ref, payload, epoch, "updatedAt") SELECT ${kind}, f.ref, f.payload, f.epoch, now() FROM ${from} f` },
    ],
  };
}

function insertIntents(table: 'ChainOutbox' | 'ChainLedgerIntent', intents: readonly Intent[]) {
  const rows = intents.map((i) => ({ kind: i.kind, ref: i.ref, payload: i.payload, epoch: i.epoch ?? null }));
  const into = table === 'ChainOutbox' ? sql`"ChainOutbox" (kind, ref, payload, epoch, "updatedAt")` : sql`"ChainLedgerIntent" (kind, ref, payload, epoch)`;
  const updated = table === 'ChainOutbox' ? sql`, now()` : sql``;
  return sql`INSERT INTO ${into}
    SELECT r.kind, r.ref, r.payload, r.epoch${updated}
    FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS (kind text, ref text, payload jsonb, epoch int))
      WITH ORDINALITY AS r(kind, ref, payload, epoch, n)
    ORDER BY r.n`;
}

/**
 * The intent of a record that the same statement creates (its CTE `created` returns a row when it
 * did), as part of a composed statement: inserted only then. A new record is pending already, so
 * there is nothing to mark (enqueueChainTx's markPending).
 */
export function newRecordIntentPart(intent: Intent, created: string, name: string): StatementPart {
  if (!checkedRecord('newRecordIntentPart', intent)) throw new Error(`newRecordIntentPart: ${intent.kind} mirrors no record; use chainIntentsPart`);
  return {
    ctes: [
      {
        name,
        body: sql`INSERT INTO "ChainOutbox" (kind, ref, payload, epoch, "updatedAt")
          SELECT ${intent.kind}, ${intent.ref}, ${JSON.stringify(intent.payload)}::jsonb, ${intent.epoch ?? null}::int, now() FROM ${sqlIdent(created)}`,
      },
    ],
  };
}
