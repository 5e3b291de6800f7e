// Sleeves: temporary bodies of a stack. Spawn (two shapes), decommission, drift, sync, freeze.
// Tokens are ledger balances of the account `sleeve:<id>`; a sleeve's key lease (KeyLease) is what
// lets it derive its stack's per-epoch keys, and decommission ends it.
import { randomBytes, randomUUID } from 'node:crypto';
import { sql, type Database, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { lockFreeRows } from '../../lib/db/lock-free.ts';
import { jsonRows, jsonValue, nextSerial, readStatement, runStatement, type ReadPart, type StatementPart } from '../../lib/db/statement.ts';
import type { Platform } from '../../lib/platform.ts';
import { Problem, badRequest, conflict, notFound } from '../../lib/errors.ts';
import { eventsFromRowsPart, eventsPart, recordEvent } from '../../lib/events.ts';
import { newRecordIntentPart, newRecordsIntentPart, type MirroredTable } from '../chains/index.ts';
import {
  balanceMilliSql,
  balanceOf,
  balancesOf,
  burn,
  burnManyPart,
  balancesFromOutput,
  BalancesShort,
  holderTotalsRead,
  activeInPart,
  markActivePart,
  mintPart,
  poolAccount,
  sleeveAccount,
  sleeveAccountSql,
  sweepPart,
  sweptUnitsSql,
  toMilli,
  zeroAmounts,
  type Move,
  type Token,
  type TokenAmounts,
} from '../economy/index.ts';
import { getStackRow, markStackActive, spendLockPart, stackTokenAndHeadSql } from '../stacks/index.ts';
import { sleeveView, type SleeveRow, type SleeveView, type SleeveViewRow } from './view.ts';

export { sleeveView, type SleeveRow, type SleeveView, type SleeveViewRow };

// The four embodiment types (a stack's kind is one of them too: stacks.STACK_KINDS is the same list).
export const SLEEVE_KINDS = ['human', 'ai', 'mining', 'memory'] as const;
export type SleeveKind = (typeof SLEEVE_KINDS)[number];

/** Initial tokens on spawn, per shape (spec: Sleeve). */
export const INITIAL_TOKENS: Record<'A' | 'B', Partial<Record<Token, number>>> = {
  A: { sync: 250, memory: 250, compute: 250, routing: 250 },
  B: { compute: 1000, memory: 1000, sync: 500, routing: 500 },
};

export const MAX_TICK_RATE_MS = 86_400_000;
export const MIN_TICK_RATE_MS = 100;

/** Tick rate per kind (spec: Sleeve kinds); 0 = event-driven. */
export function defaultTickRate(p: Platform, kind: SleeveKind): number {
  return { human: 8000, ai: 2000, mining: 0, memory: p.config.epochIntervalMs }[kind];
}

export interface SpawnInput {
  stackId: unknown;
  /** Shape A name; Shape B sends `kind`. */
  embodimentType?: unknown;
  kind?: unknown;
  hostname?: unknown;
  tickRate?: unknown;
  shape: 'A' | 'B';
}

function parseKind(v: unknown, field: string): SleeveKind {
  if (typeof v !== 'string' || !(SLEEVE_KINDS as readonly string[]).includes(v)) {
    throw badRequest(`${field} must be one of ${SLEEVE_KINDS.join(', ')}`, [{ path: field, message: 'is not a known kind' }]);
  }
  return v as SleeveKind;
}

function parseTickRate(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_TICK_RATE_MS || (v > 0 && v < MIN_TICK_RATE_MS)) {
    throw badRequest(`tickRate must be 0 (event-driven) or an integer from ${MIN_TICK_RATE_MS} to ${MAX_TICK_RATE_MS} ms`, [
      { path: 'tickRate', message: 'is out of range' },
    ]);
  }
  return v;
}

function parseHostname(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v.length === 0 || v.length > 253)
    throw badRequest('hostname must be a string of 1 to 253 characters', [{ path: 'hostname', message: 'is invalid' }]);
  return v;
}

const changed = (tx: Tx, row: SleeveRow, what: string) =>
  recordEvent(tx, {
    subject: `cog.sleeve.changed.${row.stackId}`,
    type: 'sleeve.changed',
    data: { stackId: row.stackId, sleeveId: row.id, kind: row.embodimentType, alive: row.alive, frozen: row.frozen, tickRate: row.tickRate, what },
  });

/**
 * Spawns a sleeve on an existing stack (404 otherwise) with its shape's initial tokens: the sleeve
 * row, its key lease, the mint of its tokens, its Cortex intent and its event as one statement
 * (lib/db/statement.ts), after the read of its number from the sequence (a Shape A id carries it).
 * It was an interactive transaction of a dozen statements, which on PGlite held the only
 * connection for all of them (16 ms in process; 56 ms at the median and 417 ms at p99 under the
 * mixed load): docs/decisions.md, "A spawn is one statement".
 */
export async function spawnSleeve(p: Platform, input: SpawnInput): Promise<SleeveView> {
  const kind = parseKind(input.shape === 'A' ? input.embodimentType : (input.kind ?? input.embodimentType), input.shape === 'A' ? 'embodimentType' : 'kind');
  const hostname = parseHostname(input.hostname);
  const tickRate = parseTickRate(input.tickRate) ?? defaultTickRate(p, kind);
  if (typeof input.stackId !== 'string' || !input.stackId) throw badRequest('stackId is required', [{ path: 'stackId', message: 'is required' }]);
  const stackId = input.stackId;
  const epoch = p.epochs.current();
  const seq = await nextSleeveSeq(p.db);
  const id = input.shape === 'A' ? `sleeve:${kind}:${seq}:${randomBytes(4).toString('hex')}` : `sleeve:0x${randomBytes(20).toString('hex')}`;
  const moves = Object.entries(INITIAL_TOKENS[input.shape]).map(([token, units]) => ({ token: token as Token, milli: toMilli(units!) }));
  const out = await runStatement(p.db, [
    {
      ctes: [
        { name: 'spawn_stack', body: stackTokenAndHeadSql(stackId) },
        {
          name: 'sleeve_new',
          body: sql`INSERT INTO "Sleeve" (id, "stackId", "embodimentType", seq, shape, hostname, "tickRate", "syncEpoch", "spawnEpoch", "seenHead")
            SELECT ${id}, s.id, ${kind}, ${seq}::int, ${input.shape}, ${hostname}::text, ${tickRate}::int, 0, ${epoch}::int, s."episodicHead" FROM spawn_stack s
            RETURNING *`,
        },
        { name: 'sleeve_lease', body: sql`INSERT INTO "KeyLease" ("sleeveId", "stackId") SELECT id, "stackId" FROM sleeve_new` },
      ],
      // No sleeve without its stack: the statement is undone (the mint and the rest with it).
      checks: [{ holds: sql`(SELECT count(*) FROM sleeve_new) = 1`, fail: () => notFound('Stack', stackId) }],
      outputs: [{ name: 'sleeve_row', expr: sql`(SELECT row_to_json(n) FROM sleeve_new n)` }],
    },
    mintPart(sleeveAccount(id), moves, { reason: 'spawn', ref: id, epoch, stackId }, 'spawn_mint'),
    newRecordsIntentPart(
      'spawnSleeve',
      sql`SELECT n.id AS ref, jsonb_build_object('sleeveId', n.id, 'stackId', n."stackId", 'kind', n."embodimentType", 'tokenId', s."tokenId") AS payload,
        ${epoch}::int AS epoch FROM sleeve_new n, spawn_stack s`,
      'sleeve_intent',
    ),
    eventsPart(
      [
        {
          subject: `cog.sleeve.spawned.${stackId}`,
          type: 'sleeve.spawned',
          data: { stackId, sleeveId: id, kind, tickRate, hostname },
          msgId: `sleeve-spawned:${id}`,
        },
      ],
      {
        handTo: p.db,
      },
    )!,
  ]);
  knownStackOfSleeve(id, stackId); // the sleeve's first write or decommission need not read it
  return sleeveView(sleeveFromJson(jsonValue(out.sleeve_row) as SleeveJson), balancesFromOutput(out.spawn_mint));
}

/** The next sleeve number (a Shape A id carries it), from the Sleeve.seq sequence. */
const nextSleeveSeq = (db: Database) => nextSerial(db, 'Sleeve', 'seq');

/** The sleeve row, or a 404 Problem. */
export async function getSleeveRow(db: Db | Tx, id: string): Promise<SleeveRow> {
  const row = typeof id === 'string' && id ? await db.sleeve.findUnique({ where: { id } }) : null;
  if (!row) throw notFound('Sleeve', String(id));
  return row;
}

export function listAliveSleeves(db: Db | Tx, stackId?: string): Promise<SleeveRow[]> {
  return db.sleeve.findMany({ where: { alive: true, ...(stackId ? { stackId } : {}) }, orderBy: { seq: 'asc' } });
}

/** A sleeve as the sleevesRoot sees it: its id and kind, and whether it is alive. */
export interface SleeveLeafRow {
  id: string;
  type: string;
  alive: boolean;
}

/**
 * The sleevesRoot's leaves, read in one statement with the xmin of its snapshot. With `sinceXid`
 * null: every alive sleeve (a reader's start). Otherwise only the sleeves whose leaf changed in a
 * transaction the snapshot of xmin `sinceXid` did not see (spawned, decommissioned), alive or not,
 * on the "leafXid" index the trigger "Sleeve_leafXid" keeps: O(changes). Pass the returned xmin to
 * the next call.
 */
export async function sleeveLeafChanges(db: Db, sinceXid: bigint | null): Promise<{ rows: SleeveLeafRow[]; xmin: bigint }> {
  type Out = { id: string | null; type: string | null; alive: boolean | null; xmin: string | null };
  const out =
    sinceXid === null
      ? await db.$queryRaw<Out[]>`
          SELECT NULL::text AS id, NULL::text AS type, NULL::boolean AS alive, ${SNAPSHOT_XMIN}
          UNION ALL SELECT id, "embodimentType", alive, NULL FROM "Sleeve" WHERE alive`
      : await db.$queryRaw<Out[]>`
          SELECT NULL::text AS id, NULL::text AS type, NULL::boolean AS alive, ${SNAPSHOT_XMIN}
          UNION ALL SELECT id, "embodimentType", alive, NULL FROM "Sleeve" WHERE "leafXid" >= ${sinceXid}`;
  return withSnapshotXmin(out, (r) => ({ id: r.id!, type: r.type!, alive: r.alive! }), 'sleeveLeafChanges');
}

/**
 * The xmin of the statement's snapshot, as its first branch's last column: the reads of changes
 * since a snapshot (sleeveLeafChanges, sleeveRunChanges) take their rows and the xmin to go on from
 * in one statement, so both are of one snapshot.
 */
const SNAPSHOT_XMIN = sql`pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`;

/** Splits such a statement's result: the row carrying the xmin, and the others as rows. */
function withSnapshotXmin<R extends { xmin: string | null }, T>(out: R[], row: (r: R) => T, what: string): { rows: T[]; xmin: bigint } {
  let xmin: bigint | null = null;
  const rows: T[] = [];
  for (const r of out) {
    if (r.xmin !== null) xmin = BigInt(r.xmin);
    else rows.push(row(r));
  }
  if (xmin === null) throw new Error(`${what}: no snapshot row`);
  return { rows, xmin };
}

/**
 * The sleeves whose running changed (alive, frozen, tickRate, kind, hostname) in a transaction the
 * snapshot of xmin `sinceXid` did not see, whole rows, with the xmin of this statement's snapshot
 * to pass to the next call: on the "runXid" index the trigger "Sleeve_runXid" keeps, O(changes).
 * With `sinceXid` null, no rows: only where a reader that then reads its sleeves in full goes on
 * from. A sleeve runtime's re-read (a change whose event it missed).
 */
export async function sleeveRunChanges(db: Db, sinceXid: bigint | null): Promise<{ rows: SleeveRow[]; xmin: bigint }> {
  type Out = { row: SleeveJson | string | null; xmin: string | null };
  const out =
    sinceXid === null
      ? await db.$queryRaw<Out[]>`SELECT NULL::json AS row, ${SNAPSHOT_XMIN}`
      : await db.$queryRaw<Out[]>`
          SELECT NULL::json AS row, ${SNAPSHOT_XMIN}
          UNION ALL SELECT row_to_json(s), NULL FROM "Sleeve" s WHERE s."runXid" >= ${sinceXid}`;
  return withSnapshotXmin(out, (r) => sleeveFromJson(jsonValue(r.row) as SleeveJson), 'sleeveRunChanges');
}

/** A sleeve the residue collector finds stale: behind since GREATEST(syncEpoch, spawnEpoch). */
export interface StaleSleeve {
  id: string;
  stackId: string;
  syncEpoch: number;
  spawnEpoch: number;
}

/**
 * Alive, unfrozen sleeves last synced or spawned at `maxSince` or before whose stale-ordering
 * residue for that epoch was not reported yet (`markStaleReported`), at most `take`, on the partial
 * index "Sleeve_stale_due_idx" (its predicate, repeated here word for word): O(newly stale).
 */
export function staleSleevesQuery(maxSince: number, take: number): Sql {
  return sql`SELECT id, "stackId", "syncEpoch", "spawnEpoch" FROM "Sleeve"
    WHERE alive AND NOT frozen AND "staleFor" IS DISTINCT FROM GREATEST("syncEpoch", "spawnEpoch")
      AND GREATEST("syncEpoch", "spawnEpoch") <= ${maxSince}
    ORDER BY GREATEST("syncEpoch", "spawnEpoch") LIMIT ${take}`;
}

const staleSleeveRow = jsonRows<StaleSleeve>([
  ['id', sql`t.id`],
  ['stackId', sql`t."stackId"`],
  ['syncEpoch', sql`t."syncEpoch"`],
  ['spawnEpoch', sql`t."spawnEpoch"`],
]);

/** staleSleevesQuery as one read of a composed statement (lib/db/statement.ts readStatement), in the same order. */
export function staleSleevesRead(maxSince: number, take: number): ReadPart<StaleSleeve[]> {
  return {
    expr: sql`SELECT json_agg(${staleSleeveRow.row} ORDER BY GREATEST(t."syncEpoch", t."spawnEpoch")) FROM (${staleSleevesQuery(maxSince, take)}) t`,
    parse: staleSleeveRow.parse,
  };
}

/** One batch of staleSleevesQuery's sleeves, read as staleSleevesRead reads them (through the driver when given the Database). */
export async function listStaleSleeves(db: Database | Db | Tx, maxSince: number, take: number): Promise<StaleSleeve[]> {
  return (await readStatement(db, { stale: staleSleevesRead(maxSince, take) })).stale;
}

/** The stale-ordering residue of `since` is opened (or was): the sleeve leaves the stale index until it syncs or is unfrozen. */
export async function markStaleReported(tx: Tx, sleeveId: string, since: number): Promise<void> {
  await tx.sleeve.update({ where: { id: sleeveId }, data: { staleFor: since } });
}

/**
 * The drift band of `milli`, as the generated column "driftBand" computes it (migration
 * sleeve_drift_band): width_bucket over the powers of two 1 .. 2^30, so 0 below 1, else
 * floor(log2(milli)) + 1. Monotonic: a drift above a threshold is in the threshold's band or above.
 */
export function driftBandOf(milli: number): number {
  if (milli < 1) return 0;
  return 32 - Math.clz32(Math.min(Math.floor(milli), 2 ** 31 - 1));
}

/**
 * Alive sleeves whose drift is above `aboveMilli`, found on the (alive, driftBand) index (the band
 * of aboveMilli + 1 and up, then the drift itself): the drift-checker and the sleeve-watchdog cost
 * what drifted, not every alive sleeve.
 */
export async function listAliveSleevesOverDrift(db: Database | Db | Tx, aboveMilli: number): Promise<SleeveRow[]> {
  // Most epochs none is: the ids come by one prepared read through the driver when given the
  // Database (the drift-checker and the watchdog, every epoch), the rows only when there are some.
  const { ids } = await readStatement(db, {
    ids: { expr: sql`SELECT json_agg(t.id) FROM (${overDriftQuery(aboveMilli)}) t`, parse: (v) => (jsonValue(v) as string[] | null) ?? [] },
  });
  if (!ids.length) return [];
  return ('driver' in db ? db.prisma : db).sleeve.findMany({ where: { id: { in: ids } }, orderBy: { seq: 'asc' } });
}

/** The ids of listAliveSleevesOverDrift (its plan is checked in test/worker.scale.test.ts). */
export function overDriftQuery(aboveMilli: number): Sql {
  return sql`SELECT id FROM "Sleeve" WHERE alive AND "driftBand" >= ${driftBandOf(aboveMilli + 1)}::int AND "driftMilli" > ${Math.floor(aboveMilli)}::int`;
}

/**
 * Token totals over each stack's alive sleeves, summed in the database (one query for any number
 * of stacks; GET /v1/tokens/balances and GraphQL Stack.balances).
 */
export async function aliveSleeveTotals(db: Database | Db | Tx, stackIds: readonly string[]): Promise<Map<string, TokenAmounts>> {
  if (!stackIds.length) return new Map();
  return (await readStatement(db, { totals: aliveSleeveTotalsRead(stackIds) })).totals;
}

/** aliveSleeveTotals as one read of a read statement: the alive sleeves' accounts (this context's rows) summed by the economy's read. */
export function aliveSleeveTotalsRead(stackIds: readonly string[]): ReadPart<Map<string, TokenAmounts>> {
  const holders = sql`SELECT "stackId" AS holder, ${sleeveAccountSql(sql`id`)} AS account FROM "Sleeve" WHERE alive AND "stackId" = ANY(${[...stackIds]}::text[])`;
  const totals = holderTotalsRead(holders);
  return {
    expr: totals.expr,
    parse: (v) => {
      const found = totals.parse(v);
      return new Map(stackIds.map((id) => [id, found.get(id) ?? zeroAmounts()]));
    },
  };
}

/** A sleeve as its reads show it (sleeveView): the fields they use of its row, the dates as ISO 8601 text. */
export type SleeveListRow = Omit<SleeveViewRow, 'lastSync' | 'createdAt'> & { lastSync: string; createdAt: string };

/** A sleeve of SleeveListRow over the row `s`, as a json array (lib/db/statement.ts jsonRows). */
const sleeveListRow = jsonRows<SleeveListRow>([
  ['id', sql`s.id`],
  ['stackId', sql`s."stackId"`],
  ['embodimentType', sql`s."embodimentType"`],
  ['alive', sql`s.alive`],
  ['frozen', sql`s.frozen`],
  ['driftMilli', sql`s."driftMilli"`],
  ['syncEpoch', sql`s."syncEpoch"`],
  ['finalTokens', sql`s."finalTokens"`],
  ['hostname', sql`s.hostname`],
  ['tickRate', sql`s."tickRate"`],
  ['identityPort', sql`s."identityPort"`],
  ['chainStatus', sql`s."chainStatus"`],
  ['lastSync', sql`s."lastSync"`, 'iso'],
  ['createdAt', sql`s."createdAt"`, 'iso'],
]);

/** Every sleeve of these stacks, alive or not, in spawn order, as one read (lib/db/statement.ts readStatement): one json value. */
export function sleevesOfStacksRead(stackIds: readonly string[]): ReadPart<SleeveListRow[]> {
  return {
    expr: sql`SELECT json_agg(${sleeveListRow.row} ORDER BY s.seq) FROM "Sleeve" s WHERE s."stackId" = ANY(${[...stackIds]}::text[])`,
    parse: sleeveListRow.parse,
  };
}

/** The sleeves of these ids that exist, in no order, as one read. */
export function sleevesByIdRead(ids: readonly string[]): ReadPart<SleeveListRow[]> {
  return { expr: sql`SELECT json_agg(${sleeveListRow.row}) FROM "Sleeve" s WHERE s.id = ANY(${[...ids]}::text[])`, parse: sleeveListRow.parse };
}

/** Alive sleeves with their balances (GET /v1/sleeves). */
export async function listAliveSleeveViews(p: Platform): Promise<SleeveView[]> {
  const rows = await listAliveSleeves(p.db.prisma);
  const b = await balancesOf(
    p.db.prisma,
    rows.map((r) => sleeveAccount(r.id)),
  );
  return rows.map((r) => sleeveView(r, b.get(sleeveAccount(r.id))!));
}

export async function getSleeveView(p: Platform, id: string): Promise<SleeveView> {
  const row = await getSleeveRow(p.db.prisma, id);
  return sleeveView(row, row.alive ? await balanceOf(p.db.prisma, sleeveAccount(id)) : zeroAmounts());
}

/** 404 when unknown, 409 when decommissioned or frozen (needlecast in flight). */
export async function requireActiveSleeve(tx: Db | Tx, id: string): Promise<SleeveRow> {
  const row = await getSleeveRow(tx, id);
  const refused = writeRefusal(row);
  if (refused) throw refused;
  return row;
}

/** 403 unless the sleeve belongs to the stack: a sleeve may act only for its own stack. */
export function requireSleeveOfStack(sleeve: Pick<SleeveRow, 'id' | 'stackId'>, stackId: string): void {
  if (sleeve.stackId !== stackId) {
    throw new Problem(403, 'SLEEVE_NOT_OF_STACK', 'Forbidden', `sleeve ${sleeve.id} does not belong to stack ${stackId}`);
  }
}

export async function addDrift(tx: Tx, sleeveId: string, milli: number): Promise<void> {
  await tx.$executeRaw`UPDATE "Sleeve" SET "driftMilli" = "driftMilli" + ${Math.round(milli)} WHERE id = ${sleeveId}`;
}

/**
 * A decommission as parts of one statement (lib/db/statement.ts): the sleeve's tokens swept to its
 * stack's pool under their row locks, the sleeve dead with what it held (finalTokens) and pending
 * on Cortex, its key lease ended, its Cortex intent and its event. 404 for an unknown sleeve, 409
 * when it is dead already; either leaves nothing. The balances are locked before the sleeve, as
 * the memory writers lock them. Output `sleeve_gone`: the row after it (sleeveFromJson).
 */
function decommissionParts(sleeveId: string, stackId: string, epoch: number, reason: string): StatementPart[] {
  return [
    {
      ctes: [{ name: 'sleeve_known', body: sql`SELECT id FROM "Sleeve" WHERE id = ${sleeveId}` }],
      checks: [{ holds: sql`(SELECT count(*) FROM sleeve_known) = 1`, fail: () => notFound('Sleeve', sleeveId) }],
    },
    sweepPart(sleeveAccount(sleeveId), poolAccount(stackId), { reason: 'decommission', ref: sleeveId, epoch }, 'decommission_sweep'),
    {
      ctes: [
        {
          name: 'sleeve_gone',
          // finalTokens reads the sweep's CTE: the tokens are swept before the sleeve row is locked.
          body: sql`UPDATE "Sleeve" SET alive = false, frozen = false, "decommissionedAt" = now(), "decommissionWhy" = ${reason},
              "finalTokens" = ${sweptUnitsSql('decommission_sweep')}, "chainStatus" = 'pending'
            WHERE id = ${sleeveId} AND alive = true RETURNING *`,
        },
        { name: 'sleeve_lease_end', body: sql`UPDATE "KeyLease" SET active = false, "endedAt" = now() WHERE "sleeveId" = ${sleeveId} AND active = true` },
      ],
      checks: [
        { holds: sql`(SELECT count(*) FROM sleeve_gone) = 1`, fail: () => conflict(`sleeve ${sleeveId} is already decommissioned`, 'SLEEVE_DECOMMISSIONED') },
      ],
      outputs: [{ name: 'sleeve_gone_row', expr: sql`(SELECT row_to_json(g) FROM sleeve_gone g)` }],
    },
    // The sleeve's update above marks it pending, as enqueueChainTx's markPending would.
    newRecordIntentPart({ kind: 'decommissionSleeve', ref: sleeveId, payload: { sleeveId, stackId, reason }, epoch }, 'sleeve_gone', 'sleeve_gone_intent'),
    eventsFromRowsPart(
      'sleeve_gone_event',
      sql`SELECT ${`cog.sleeve.decommissioned.${stackId}`}::text AS subject, ${`sleeve-decommissioned:${sleeveId}`}::text AS "msgId", 'sleeve.decommissioned' AS type,
        jsonb_build_object('stackId', g."stackId", 'sleeveId', g.id, 'kind', g."embodimentType", 'reason', ${reason}::text) AS data FROM sleeve_gone g`,
    ),
  ];
}

/** decommissionParts as one statement on `on` (the driver, or a caller's transaction), the sleeve's stack read through `reader`; the row after it. */
async function decommissionOn(on: Database | Tx, reader: Db | Tx, epoch: number, sleeveId: string, reason: string): Promise<SleeveRow> {
  const stackId = await stackOfSleeve(reader, sleeveId);
  const out = await runStatement(on, decommissionParts(sleeveId, stackId, epoch, reason));
  return sleeveFromJson(jsonValue(out.sleeve_gone_row) as SleeveJson);
}

/** Decommission inside the caller's transaction (a needlecast's step, a pass): decommissionParts as one statement of it. */
export function decommissionInTx(tx: Tx, epoch: number, sleeveId: string, reason: string): Promise<SleeveRow> {
  return decommissionOn(tx, tx, epoch, sleeveId, reason);
}

/**
 * DELETE /v1/sleeves/:id and the GraphQL mutation: 404 unknown, 409 when already dead. Head
 * unchanged. One statement (decommissionParts) after the sleeve's stack, which is cached: an
 * interactive transaction of ten statements before.
 */
export async function decommissionSleeve(p: Platform, sleeveId: string, reason: string): Promise<SleeveView> {
  return sleeveView(await decommissionOn(p.db, p.db.prisma, p.epochs.current(), sleeveId, reason), zeroAmounts());
}

/**
 * Sync: drift to 0 for 1 sync token (402 when short); the sleeve catches up with the head. One
 * statement through the driver (syncStatement); when it declines, the interactive transaction
 * below says precisely why (404, 409, 402), or does it if things changed in between.
 */
export async function syncSleeve(p: Platform, sleeveId: string): Promise<{ ok: true; epoch: number }> {
  const epoch = p.epochs.current();
  const stackId = await stackOfSleeve(p.db.prisma, sleeveId);
  if (await syncStatement(p.db, { id: sleeveId, stackId }, epoch)) return { ok: true, epoch };
  await p.db.prisma.$transaction(async (tx) => {
    const row = await requireActiveSleeve(tx, sleeveId);
    await spendFromSleeve(tx, row, [{ token: 'sync', milli: SYNC_COST_MILLI }], { reason: 'sync', ref: sleeveId, epoch });
    const stack = await getStackRow(tx, row.stackId);
    const updated = await tx.sleeve.update({
      where: { id: sleeveId },
      data: { driftMilli: 0, flagged: false, syncEpoch: epoch, lastSync: new Date(), seenHead: stack.episodicHead },
    });
    await changed(tx, updated, 'sync');
  });
  return { ok: true, epoch };
}

const SYNC_COST_MILLI = 1000n;

/**
 * The sync as one statement (spendInOneStatement): the token burned, the drift and flag cleared,
 * the sleeve on the head as the stack lock found it, its sleeve.changed event; on an alive,
 * unfrozen sleeve only. Ten round trips in a transaction before (a sync was a twentieth of the
 * mixed load's requests and a third of a gateway's statements).
 */
function syncStatement(db: Database, sleeve: Pick<SleeveRow, 'id' | 'stackId'>, epoch: number): Promise<boolean> {
  return spendInOneStatement(db, sleeve, { token: 'sync', milli: SYNC_COST_MILLI }, { reason: 'sync', ref: sleeve.id, epoch }, (declined) => [
    {
      ctes: [
        {
          name: 'sleeve_sync',
          body: sql`UPDATE "Sleeve" SET "driftMilli" = 0, flagged = false, "syncEpoch" = ${epoch}::int, "lastSync" = now(),
              "seenHead" = (SELECT "episodicHead" FROM spend_lock)
            WHERE id = ${sleeve.id} AND alive = true AND frozen = false
            RETURNING id, "stackId", "embodimentType", alive, frozen, "tickRate"`,
        },
      ],
      checks: [{ holds: sql`(SELECT count(*) FROM sleeve_sync) = 1`, fail: declined }],
    },
    eventsFromRowsPart(
      'sleeve_sync_event',
      sql`SELECT 'cog.sleeve.changed.' || "stackId" AS subject, ${randomUUID()}::text AS "msgId", 'sleeve.changed' AS type,
        jsonb_build_object('stackId', "stackId", 'sleeveId', id, 'kind', "embodimentType", 'alive', alive, 'frozen', frozen, 'tickRate', "tickRate", 'what', 'sync') AS data
        FROM sleeve_sync`,
    ),
  ]);
}

export async function freezeSleeve(tx: Tx, id: string): Promise<SleeveRow> {
  await requireActiveSleeve(tx, id);
  const row = await tx.sleeve.update({ where: { id }, data: { frozen: true } });
  await changed(tx, row, 'frozen');
  return row;
}

export async function unfreezeSleeve(tx: Tx, id: string): Promise<SleeveRow> {
  const cur = await getSleeveRow(tx, id);
  if (!cur.alive) throw conflict(`sleeve ${id} is decommissioned`, 'SLEEVE_DECOMMISSIONED');
  const row = await tx.sleeve.update({ where: { id }, data: { frozen: false } });
  await changed(tx, row, 'unfrozen');
  return row;
}

/** Sum over the stack's alive sleeves (GET /v1/tokens/balances/:stackId); 404 for an unknown stack. */
export async function stackTokenTotals(p: Platform, stackId: string): Promise<{ stackId: string; sleeveTotals: TokenAmounts }> {
  await getStackRow(p.db.prisma, stackId);
  return { stackId, sleeveTotals: (await aliveSleeveTotals(p.db, [stackId])).get(stackId)! };
}

/** Alive sleeves whose drift exceeds the maximum (GET /v1/coordination/desync). */
export async function desyncedSleeves(p: Platform): Promise<Array<{ id: string; stackId: string; drift: number }>> {
  const limit = Math.round(p.config.driftMax * 1000);
  const rows = await listAliveSleevesOverDrift(p.db.prisma, limit);
  return rows.map((r) => ({ id: r.id, stackId: r.stackId, drift: r.driftMilli / 1000 }));
}

/** The stack's alive, non-frozen sleeve with the most memory tokens (pays stack-level reads/pins). */
export async function richestMemorySleeve(tx: Db | Tx, stackId: string): Promise<SleeveRow | null> {
  return (await richestMemoryPayer(tx, stackId))?.sleeve ?? null;
}

/** The alive, unfrozen sleeve of the stack holding the most memory tokens, with that balance (units); two queries. */
export async function richestMemoryPayer(tx: Db | Tx, stackId: string): Promise<{ sleeve: SleeveRow; memory: number } | null> {
  const rows = (await listAliveSleeves(tx, stackId)).filter((r) => !r.frozen);
  if (!rows.length) return null;
  const b = await balancesOf(
    tx,
    rows.map((r) => sleeveAccount(r.id)),
  );
  let best = rows[0]!;
  for (const r of rows) if (b.get(sleeveAccount(r.id))!.memory > b.get(sleeveAccount(best.id))!.memory) best = r;
  return { sleeve: best, memory: b.get(sleeveAccount(best.id))!.memory };
}

/**
 * richestMemoryPayer as a SELECT over a stack id expression, for a statement the caller composes
 * (recall's read, one statement through the driver): at most one row (id, stackId, memoryMilli as
 * text), the alive, unfrozen sleeve with the most memory, the first spawned of equals.
 */
export const richestPayerSql = (stackId: Sql): Sql =>
  sql`SELECT s.id, s."stackId", m.milli::text AS "memoryMilli" FROM "Sleeve" s
    CROSS JOIN LATERAL (SELECT ${balanceMilliSql(sleeveAccountSql(sql`s.id`), 'memory')} AS milli) m
    WHERE s."stackId" = ${stackId} AND s.alive AND NOT s.frozen ORDER BY m.milli DESC, s.seq ASC LIMIT 1`;

/** A one-statement spend declined (spendInOneStatement): the stack or the sleeve was not as read. */
class SpendDeclined extends Error {}
/** The stack is not yet active in the epoch: the spend runs again with the activity mark. */
class MarkDue extends Error {}

/**
 * A spend of the sleeve's and what it pays for, as one statement through the driver
 * (lib/db/statement.ts), no interactive transaction: spendFromSleeve and the sleeve's change
 * (`sleeveParts`), the same rows in the same lock order: the stack row (the stacks' spendLockPart,
 * whose CTE spend_lock holds the locked row), the activity mark (the economy's markActivePart, only
 * when it is due: its check activeInPart is one probe, planning the mark ~1.5 ms on PGlite, so the
 * first spend of a stack in an epoch runs the statement twice), the burn (the economy's
 * burnManyPart: the conditional debit, the posting's ledger entries, the burn intent), then the
 * sleeve's parts, which call `declined` when the sleeve is not alive and unfrozen. True when it
 * applied. False, nothing written, when a check fails (the stack gone, the balance short, the
 * sleeve frozen or decommissioned): the caller then runs the interactive transaction, which throws
 * the precise 402 / 404 / 409.
 */
async function spendInOneStatement(
  db: Database,
  sleeve: Pick<SleeveRow, 'id' | 'stackId'>,
  cost: Move,
  meta: { reason: string; ref?: string; epoch: number },
  sleeveParts: (declined: () => Error) => StatementPart[],
): Promise<boolean> {
  const declined = () => new SpendDeclined();
  const parts = (mark: boolean): StatementPart[] => [
    spendLockPart(sleeve.stackId, declined),
    mark ? markActivePart(sleeve.stackId, meta.epoch) : activeInPart(sleeve.stackId, meta.epoch, () => new MarkDue()),
    burnManyPart([{ from: sleeveAccount(sleeve.id), moves: [cost], ...meta, stackId: sleeve.stackId }])!,
    ...sleeveParts(declined),
  ];
  try {
    await runStatement(db, parts(false)).catch((e) => {
      if (e instanceof MarkDue) return runStatement(db, parts(true));
      throw e;
    });
    return true;
  } catch (e) {
    if (e instanceof SpendDeclined || e instanceof BalancesShort) return false;
    throw e;
  }
}

/**
 * A read the sleeve pays for (recall), as one statement (spendInOneStatement): the spend, then
 * recordSleeveRead's conditional drift and seen head. False, nothing written, when it declined:
 * the caller then runs spendFromSleeve and recordSleeveRead in a transaction.
 */
export function spendForRead(
  db: Database,
  sleeve: Pick<SleeveRow, 'id' | 'stackId'>,
  cost: Move,
  read: { head: string | null; driftMilli: number },
  meta: { reason: string; ref?: string; epoch: number },
): Promise<boolean> {
  return spendInOneStatement(db, sleeve, cost, meta, (declined) => [
    {
      ctes: [
        {
          name: 'sleeve_read',
          body: sql`UPDATE "Sleeve" SET "driftMilli" = "driftMilli" + ${Math.round(read.driftMilli)}::int, "seenHead" = COALESCE(${read.head}::text, "seenHead")
            WHERE id = ${sleeve.id} AND alive = true AND frozen = false RETURNING 1`,
        },
      ],
      checks: [{ holds: sql`(SELECT count(*) FROM sleeve_read) = 1`, fail: declined }],
    },
  ]);
}

/**
 * A spend of the sleeve's with what it pays for written by the caller's parts (another context's
 * rows: memory's pin), as one statement (spendInOneStatement); the sleeve must be alive and
 * unfrozen, a check (its row is not written). False, nothing written, when it declined: the
 * caller then runs its interactive transaction, which throws the precise refusal. A failing check
 * of the caller's parts throws that part's error, nothing written either.
 */
export function spendWithParts(
  db: Database,
  sleeve: Pick<SleeveRow, 'id' | 'stackId'>,
  cost: Move,
  meta: { reason: string; ref?: string; epoch: number },
  parts: readonly StatementPart[],
): Promise<boolean> {
  return spendInOneStatement(db, sleeve, cost, meta, (declined) => [
    { checks: [{ holds: sql`EXISTS (SELECT 1 FROM "Sleeve" WHERE id = ${sleeve.id} AND alive AND NOT frozen)`, fail: declined }] },
    ...parts,
  ]);
}

/** drift-checker: flags an alive sleeve above the drift maximum (sync clears it); true when newly flagged. */
export async function flagSleeve(tx: Tx, id: string): Promise<boolean> {
  const done = await tx.sleeve.updateMany({ where: { id, alive: true, flagged: false }, data: { flagged: true } });
  return done.count === 1;
}

/**
 * Tokens a sleeve spends on an operation: burned from its account. Spending is what a stack does,
 * so it marks the stack active for EBC decay (a quiescent stack spends nothing); `activity: false`
 * when the caller marks it itself (a memory write moves the head, which does). A sleeve
 * decommissioned since the caller read it (its tokens went to the stack pool) is a 409 for what it
 * is, not a 402 "not enough tokens".
 */
export async function spendFromSleeve(
  tx: Tx,
  sleeve: Pick<SleeveRow, 'id' | 'stackId'>,
  costs: Move[],
  meta: { reason: string; ref?: string; epoch: number; activity?: boolean },
): Promise<string> {
  if (meta.activity !== false) await markStackActive(tx, sleeve.stackId, meta.epoch);
  try {
    return await burn(tx, sleeveAccount(sleeve.id), costs, { reason: meta.reason, ref: meta.ref, epoch: meta.epoch, stackId: sleeve.stackId });
  } catch (e) {
    if (e instanceof Problem && e.status === 402) {
      const row = await tx.sleeve.findUnique({ where: { id: sleeve.id }, select: { alive: true } });
      if (row && !row.alive) throw conflict(`sleeve ${sleeve.id} is decommissioned`, 'SLEEVE_DECOMMISSIONED');
    }
    throw e;
  }
}

/** The sleeve's key lease is active (on `stackId` when given): what lets it derive its stack's epoch keys; 409 otherwise. */
export async function requireKeyLease(tx: Db | Tx, sleeveId: string, stackId?: string): Promise<void> {
  const lease = await tx.keyLease.findUnique({ where: { sleeveId } });
  if (!lease?.active || (stackId !== undefined && lease.stackId !== stackId)) {
    throw conflict(`sleeve ${sleeveId} holds no active key lease${stackId !== undefined ? ` on ${stackId}` : ''}`, 'NO_KEY_LEASE');
  }
}

/** Each stack's sleeves (alive or not), in spawn order. */
export async function sleevesOfStacks(db: Db | Tx, stackIds: readonly string[]): Promise<Map<string, SleeveRow[]>> {
  const out = new Map<string, SleeveRow[]>(stackIds.map((id) => [id, []]));
  if (!stackIds.length) return out;
  for (const s of await db.sleeve.findMany({ where: { stackId: { in: [...stackIds] } }, orderBy: { seq: 'asc' } })) out.get(s.stackId)?.push(s);
  return out;
}

/** A Sleeve row as row_to_json gives it: the timestamps as text, the xids as numbers. */
type SleeveJson = Omit<SleeveRow, 'lastSync' | 'decommissionedAt' | 'createdAt' | 'leafXid' | 'runXid'> & {
  lastSync: string;
  decommissionedAt: string | null;
  createdAt: string;
  leafXid: number | string | null;
  runXid: number | string | null;
};
const sleeveFromJson = (r: SleeveJson): SleeveRow => ({
  ...r,
  lastSync: new Date(r.lastSync),
  decommissionedAt: r.decommissionedAt === null ? null : new Date(r.decommissionedAt),
  createdAt: new Date(r.createdAt),
  leafXid: r.leafXid === null ? null : BigInt(r.leafXid),
  runXid: r.runXid === null ? null : BigInt(r.runXid),
});

/** sleevesOfStacks as one read of a read statement (lib/db/statement.ts readStatement): each stack's sleeve rows, in spawn order. */
export function sleeveRowsOfStacksRead(stackIds: readonly string[]): ReadPart<Map<string, SleeveRow[]>> {
  return {
    expr: sql`SELECT json_agg(row_to_json(s) ORDER BY s.seq) FROM "Sleeve" s WHERE s."stackId" = ANY(${[...stackIds]}::text[])`,
    parse: (v) => {
      const out = new Map<string, SleeveRow[]>(stackIds.map((id) => [id, []]));
      for (const r of (jsonValue(v) as SleeveJson[] | null) ?? []) out.get(r.stackId)?.push(sleeveFromJson(r));
      return out;
    },
  };
}

/** The accounts of the alive sleeves of these stacks, as an SQL query of one column (a read of their balances composes it). */
export const aliveSleeveAccountsSql = (stackIds: readonly string[]): Sql =>
  sql`SELECT ${sleeveAccountSql(sql`id`)} FROM "Sleeve" WHERE "stackId" = ANY(${[...stackIds]}::text[]) AND alive`;

/** A sleeve's stack never changes: which stack a sleeve belongs to is cached after the first read. */
const stackOfSleeveCache = new Map<string, string>();
const STACK_OF_SLEEVE_CACHE_MAX = 100_000;

/** The stack a sleeve belongs to (404 when there is no such sleeve); cached, a sleeve never changes stack. */
export async function stackOfSleeve(db: Db | Tx, sleeveId: string): Promise<string> {
  const cached = stackOfSleeveCache.get(sleeveId);
  if (cached !== undefined) return cached;
  const row = typeof sleeveId === 'string' && sleeveId ? await db.sleeve.findUnique({ where: { id: sleeveId }, select: { stackId: true } }) : null;
  if (!row) throw notFound('Sleeve', String(sleeveId));
  knownStackOfSleeve(sleeveId, row.stackId);
  return row.stackId;
}

function knownStackOfSleeve(sleeveId: string, stackId: string) {
  if (stackOfSleeveCache.size >= STACK_OF_SLEEVE_CACHE_MAX) stackOfSleeveCache.clear();
  stackOfSleeveCache.set(sleeveId, stackId);
}

/** Why a sleeve may not write now (the refusals requireActiveSleeve throws), or null. */
export function writeRefusal(sleeve: Pick<SleeveRow, 'id' | 'alive' | 'frozen'>): Problem | null {
  if (!sleeve.alive) return conflict(`sleeve ${sleeve.id} is decommissioned`, 'SLEEVE_DECOMMISSIONED');
  if (sleeve.frozen) return conflict(`sleeve ${sleeve.id} is frozen by a needlecast in flight`, 'SLEEVE_FROZEN');
  return null;
}

/** A group of memory writes whose sleeve was decommissioned or frozen after it was read: the transaction is refused. */
export class SleevesNotActive extends Error {
  constructor(readonly sleeveIds: string[]) {
    super(`sleeves ${sleeveIds.join(', ')} were decommissioned or frozen, or saw another head, meanwhile`);
  }
}

/**
 * recordSleeveWrite for a group commit, as part of the write's one statement (lib/db/statement.ts):
 * each sleeve's drift grows by the sum of its writes and it has seen its last one. `seenHead`, when
 * given, is the head the writer had seen when the write was planned (its shadow branch was decided
 * on it): the sleeve must still have seen that one. When any sleeve is no longer alive and
 * unfrozen, or has seen another head meanwhile (a recall), the statement is undone with
 * SleevesNotActive.
 */
export function sleeveWritesPart(
  writes: ReadonlyArray<{ sleeveId: string; head: string; driftMilli: number; seenHead?: string | null }>,
): StatementPart | null {
  const per = new Map<string, { drift: number; head: string; seen: string | null; check: boolean }>();
  for (const w of writes) {
    const cur = per.get(w.sleeveId);
    // The sleeve's first write in the batch says what it had seen before the batch.
    per.set(w.sleeveId, {
      drift: (cur?.drift ?? 0) + Math.round(w.driftMilli),
      head: w.head,
      seen: cur ? cur.seen : (w.seenHead ?? null),
      check: cur ? cur.check : w.seenHead !== undefined,
    });
  }
  if (!per.size) return null;
  const ids = [...per.keys()];
  const rows = ids.map((id) => {
    const v = per.get(id)!;
    return { id, d: v.drift, h: v.head, s: v.seen, c: v.check };
  });
  // `s.id = ANY(ids)` besides the join: the statement is prepared, and its generic plan takes the
  // recordset for 100 rows (a function's default), for which a hash join over a scan of the whole
  // table is cheaper than 100 index probes. On a grown table (135 pages of dead row versions after
  // 2 minutes of writes on a server without autovacuum) that scan was 0.98 ms of a 10-write
  // statement; the planner takes an array parameter for 10 elements, so with it the plan reads the
  // sleeves by their key (0.13 ms). A plan is made again when the table's statistics change
  // (lib/db/table-care.ts where nothing else vacuums).
  return {
    ctes: [
      {
        name: 'sleeve_writes',
        body: sql`UPDATE "Sleeve" s SET "driftMilli" = s."driftMilli" + v.d, "seenHead" = v.h
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id text, d int, h text, s text, c boolean)
          WHERE s.id = v.id AND s.id = ANY(${ids}::text[]) AND s.alive = true AND s.frozen = false AND (NOT v.c OR s."seenHead" IS NOT DISTINCT FROM v.s) RETURNING 1`,
      },
    ],
    checks: [{ holds: sql`(SELECT count(*) FROM sleeve_writes) = ${ids.length}::int`, fail: () => new SleevesNotActive(ids) }],
  };
}

/** What a write reads of its sleeves (writeSleevesRead). */
export type WriteSleeve = Pick<SleeveRow, 'id' | 'stackId' | 'embodimentType' | 'alive' | 'frozen' | 'seenHead'>;

/** The sleeves of these ids that exist, as one read of a read statement (lib/db/statement.ts readStatement). */
export function writeSleevesRead(ids: readonly string[]): ReadPart<Map<string, WriteSleeve>> {
  const unique = [...new Set(ids)].filter((id) => typeof id === 'string' && id);
  return {
    expr: sql`SELECT json_agg(json_build_object('id', id, 'stackId', "stackId", 'embodimentType', "embodimentType", 'alive', alive,
        'frozen', frozen, 'seenHead', "seenHead")) FROM "Sleeve" WHERE id = ANY(${unique}::text[])`,
    parse: (v) => new Map(((jsonValue(v) as WriteSleeve[] | null) ?? []).map((r) => [r.id, r])),
  };
}

/**
 * A read by the sleeve: drift +`driftMilli`, and it has seen `head` (when there is one); one
 * statement. Conditional like a write: a sleeve decommissioned or frozen since the caller read it
 * is refused (409), so it neither pays nor drifts.
 */
export async function recordSleeveRead(tx: Tx, sleeveId: string, head: string | null, driftMilli: number): Promise<void> {
  const moved = await tx.$executeRaw`UPDATE "Sleeve" SET "driftMilli" = "driftMilli" + ${Math.round(driftMilli)}, "seenHead" = COALESCE(${head}, "seenHead")
    WHERE id = ${sleeveId} AND alive = true AND frozen = false`;
  if (moved === 0) await requireActiveSleeve(tx, sleeveId); // throws the precise 404 / 409
}

/** The stacks owning those of these ids that are sleeves. */
export async function stacksOfSleeves(db: Db | Tx, ids: readonly string[]): Promise<string[]> {
  if (!ids.length) return [];
  return (await db.sleeve.findMany({ where: { id: { in: [...ids] } }, select: { stackId: true } })).map((s) => s.stackId);
}

/** The chain outbox's writer of the sleeves' chainStatus (wired by bin/assembly.ts). */
export const sleeveChainRecords: MirroredTable = {
  lockFree: (tx, ids) => lockFreeRows(tx, '"Sleeve"', ids),
  setChainStatuses: async (tx, rows) => {
    if (!rows.length) return;
    await tx.$executeRaw`UPDATE "Sleeve" s SET "chainStatus" = v.status
      FROM unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.status)}::text[]) AS v(id, status) WHERE s.id = v.id`;
  },
};
