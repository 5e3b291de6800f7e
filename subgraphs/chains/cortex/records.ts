// The chain side of mirrored records: a record is pending while any of its intents is
// outstanding, then confirmed, or failed when its last one reverted. The rules are the outbox's;
// the chainStatus columns are their tables' owners', written through the writers they hand the
// chains (record-port.ts). EpochAnchor is the chains' own table.
import type { Db, Tx } from '../../../lib/db/index.ts';
import { lockFreeRows } from '../../../lib/db/lock-free.ts';
import { mirroredTable, type ChainStatus, type MirroredTable } from '../record-port.ts';

type RecordRef =
  | { table: 'stack'; id: string; kinds: string[]; key: 'stackId' }
  | { table: 'sleeve'; id: string; kinds: string[]; key: 'sleeveId' }
  | { table: 'residue'; id: string; kinds: string[]; key: 'residueId' }
  | { table: 'anchor'; id: number; kinds: string[]; key: 'epoch' };

export type { ChainStatus };

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

type StatusRow = { id: string; status: ChainStatus; txHash?: string };

/** The epoch anchors' chainStatus (and the anchor transaction's hash), the chains' own table. */
const anchors = {
  lockFree: (tx: Tx, epochs: string[]) => lockFreeRows(tx, '"EpochAnchor"', epochs, { column: 'epoch', type: 'int' }),
  setChainStatuses: async (tx: Tx, rows: ReadonlyArray<StatusRow>) => {
    if (!rows.length) return;
    await tx.$executeRaw`UPDATE "EpochAnchor" a SET "chainStatus" = v.status, "txHash" = COALESCE(v.hash, a."txHash")
      FROM unnest(${rows.map((r) => Number(r.id))}::int[], ${rows.map((r) => r.status)}::text[], ${rows.map((r) => r.txHash ?? null)}::text[])
        AS v(epoch, status, hash) WHERE a.epoch = v.epoch`;
  },
};

/** The writer of a record table's chainStatus: the chains' own for anchors, the owner's for the rest. */
const tableOf = (table: RecordRef['table']): Pick<MirroredTable, 'lockFree'> & { setChainStatuses(tx: Tx, rows: ReadonlyArray<StatusRow>): Promise<void> } =>
  table === 'anchor' ? anchors : mirroredTable(table);

async function write(tx: Tx, r: RecordRef, status: ChainStatus): Promise<void> {
  await tableOf(r.table).setChainStatuses(tx, [{ id: String(r.id), status }]);
}

/** Kinds whose intent comes with a new record, which is created pending: nothing to mark. */
export const CREATED_PENDING = ['mintIdentity', 'spawnSleeve', 'openResidue'] as const;

/** A new intent makes its record pending again (called by enqueueChainTx, in the caller's transaction). */
export async function markPending(tx: Tx, kind: string, payload: Record<string, unknown>): Promise<void> {
  if ((CREATED_PENDING as readonly string[]).includes(kind)) return; // created pending
  const r = recordOf(kind, payload);
  if (r) await write(tx, r, 'pending');
}

/** Its chain side is outstanding again (the chain lost the block that held it). */
export async function markRecordPending(tx: Tx, kind: string, payload: Record<string, unknown>): Promise<void> {
  const r = recordOf(kind, payload);
  if (r) await write(tx, r, 'pending');
}

/**
 * The outbox ref of a record's intents: its id (an anchor's: `anchor:<epoch>`). enqueueChainTx holds
 * every record intent to it, so a record's outstanding intents are found on the ref index.
 */
export function recordRefOf(r: RecordRef): string {
  return r.table === 'anchor' ? `anchor:${r.id}` : r.id;
}

/**
 * Of these records (of one table), the ids that still have an intent outstanding: one statement on
 * the ref index. Filtering the open rows by payload instead scanned every open row once per record,
 * and under load the open rows are thousands (the ledger rows riding on a settlement): a block's
 * fifty records took seconds.
 */
async function outstandingOf(tx: Tx, records: RecordRef[]): Promise<Set<string>> {
  if (!records.length) return new Set();
  const { kinds, key } = records[0];
  const rows = await tx.$queryRaw<{ id: string }[]>`
    SELECT DISTINCT payload->>${key} AS id FROM "ChainOutbox"
    WHERE ref = ANY(${records.map(recordRefOf)}::text[]) AND kind = ANY(${kinds}::text[]) AND status IN ('pending', 'submitted')
      AND payload->>${key} = ANY(${records.map((r) => String(r.id))}::text[])`;
  return new Set(rows.map((r) => r.id));
}

export interface RecordOutcome {
  kind: string;
  payload: Record<string, unknown>;
  outcome: 'confirmed' | 'failed';
  txHash?: string;
}

/**
 * Settles the records of many intents (confirmed or failed, or pending while another of a record's
 * intents is outstanding), in one short transaction per table that never waits for a writer
 * holding a record's row (a perceive holds its stack's row until it commits; settling every stack's
 * updateStack in one transaction used to queue behind each of them in turn): busy rows are skipped
 * (FOR UPDATE SKIP LOCKED) and returned, to be tried again later. The newest outcome per record wins.
 */
export async function trySettleRecords(db: Db, items: RecordOutcome[]): Promise<RecordOutcome[]> {
  const byTable = new Map<RecordRef['table'], Map<string | number, { ref: RecordRef; item: RecordOutcome }>>();
  for (const item of items) {
    const ref = recordOf(item.kind, item.payload);
    if (!ref) continue;
    let m = byTable.get(ref.table);
    if (!m) byTable.set(ref.table, (m = new Map()));
    m.set(ref.id, { ref, item });
  }
  const busy: RecordOutcome[] = [];
  for (const records of byTable.values()) {
    const ids = [...records.keys()].map(String);
    const table = tableOf([...records.values()][0].ref.table);
    await db.$transaction(async (tx) => {
      const { locked, existing } = await table.lockFree(tx, ids);
      const mine = new Set(locked);
      const there = new Set(existing);
      const settling = [...records.values()].filter(({ ref }) => mine.has(String(ref.id)));
      // Confirmed or failed unless another intent of the record is still outstanding.
      const outstanding = await outstandingOf(
        tx,
        settling.map((r) => r.ref),
      );
      // One statement for the table's records: one UPDATE each held PGlite's one connection for
      // 50-90 ms when a block settled a fold's thirty-odd residues, and every write waited behind it.
      await table.setChainStatuses(
        tx,
        settling.map(({ ref, item }) => ({ id: String(ref.id), status: outstanding.has(String(ref.id)) ? 'pending' : item.outcome, txHash: item.txHash })),
      );
      for (const [id, { item }] of records) if (!mine.has(String(id)) && there.has(String(id))) busy.push(item);
    });
  }
  return busy;
}
