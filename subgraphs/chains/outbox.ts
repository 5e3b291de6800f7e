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
 * enqueueCoalescedChainTx as part of a composed statement, for one intent or several of one kind
 * (a group commit's stacks, distinct refs): the waiting intent of the kind for each `ref` rewritten
 * in place, else a new one, inserted in the given order. The record each mirrors must be marked
 * pending in the same statement by its owner (markPending's rule: a new intent makes its record
 * pending; while one waits the record is pending already), who updates that row there anyway: a
 * statement may change a row only once. `name` prefixes the part's CTEs.
 */
export function coalescedChainIntentPart(intents: Intent | readonly Intent[], name: string): StatementPart | null {
  const list = Array.isArray(intents) ? (intents as readonly Intent[]) : [intents as Intent];
  if (!list.length) return null;
  const kind = list[0]!.kind;
  if (list.some((i) => i.kind !== kind)) throw new Error('coalescedChainIntentPart: intents of one kind only');
  const rows = list.map((i) => ({ ref: i.ref, payload: i.payload, epoch: i.epoch ?? null }));
  const waiting = sqlIdent(`${name}_waiting`);
  return {
    ctes: [
      {
        name: `${name}_rows`,
        body: sql`SELECT r.ref, r.payload, r.epoch, r.n FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS (ref text, payload jsonb, epoch int))
          WITH ORDINALITY AS r(ref, payload, epoch, n)`,
      },
      {
        name: `${name}_waiting`,
        body: sql`UPDATE "ChainOutbox" o SET payload = v.payload, "updatedAt" = now() FROM ${sqlIdent(`${name}_rows`)} v
          WHERE o.kind = ${kind} AND o.ref = v.ref AND o.status = 'pending' RETURNING o.ref`,
      },
      {
        name: `${name}_new`,
        body: sql`INSERT INTO "ChainOutbox" (kind, ref, payload, epoch, "updatedAt")
          SELECT ${kind}, v.ref, v.payload, v.epoch, now() FROM ${sqlIdent(`${name}_rows`)} v
          WHERE NOT EXISTS (SELECT 1 FROM ${waiting} w WHERE w.ref = v.ref) ORDER BY v.n`,
      },
    ],
  };
}
