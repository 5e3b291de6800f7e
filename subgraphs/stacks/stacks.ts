// Stacks: persistent identities. Two creation shapes (spec: Stack):
//  A {name, kind?, cpv?} -> id `stack:<kind>:<tokenId>:<12 hex>`, keypair generated here,
//                       identityPriv returned once, cpv all 1 unless given;
//  B {pubkey, cpv}   -> id `stack:<address(pubkey)>`, the client holds the key.
// The master secret (root of per-epoch keys) is random, stored only wrapped under p.masterKey.
import { randomBytes } from 'node:crypto';
import * as ed from '@noble/ed25519';
import { sql, type Database, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { joinParts, jsonRows, jsonValue, nextSerial, runStatement, type ReadPart, type StatementPart } from '../../lib/db/statement.ts';
import { lockFreeRows } from '../../lib/db/lock-free.ts';
import type { Platform } from '../../lib/platform.ts';
import { badRequest, conflict, notFound } from '../../lib/errors.ts';
import { epochKey, generateIdentity, randomSecret, unwrapSecret, wrapSecret } from '../../lib/crypto.ts';
import { stackAddress } from '../../lib/address.ts';
import { eventsPart } from '../../lib/events.ts';
import { newRecordIntentPart, type MirroredTable, type StackAnchor, type StackHeads } from '../chains/index.ts';
import { lastActiveEpochs, markActive, markActivePart, NEVER_ACTIVE, openAccrualPart, type TokenAmounts } from '../economy/index.ts';
import type { Stack as StackRow } from '../../generated/prisma/client.ts';

export type { StackRow };

export const STACK_KINDS = ['human', 'ai', 'mining', 'memory'] as const;
export type StackKind = (typeof STACK_KINDS)[number];
export const CPV_KEYS = ['syncCoeff', 'memoryCoeff', 'computeCoeff', 'residueCoeff', 'routingCoeff'] as const;
export type Cpv = Record<(typeof CPV_KEYS)[number], number>;

export interface CreateStackInput {
  name?: unknown;
  kind?: unknown;
  pubkey?: unknown;
  cpv?: unknown;
}

/** A stack's own fields in the union read of both shapes (the read of one stack adds sleeves, anchors, balances above the contexts). */
export interface StackCore {
  id: string;
  tokenId: number;
  name: string;
  kind: string;
  pubKey: string;
  pubkey: string;
  epoch: number;
  cpv: Cpv;
  binding: { floor: number; decayRate: number };
  createdAt: string;
  episodicHead: string | null;
  lastActiveEpoch: number;
  chainStatus: string;
}

/** The creation response: a new stack has no sleeves, no anchors and no balances; Shape A adds identityPriv once. */
export interface CreatedStack extends StackCore {
  sleeves: [];
  anchors: StackAnchor[];
  balances: TokenAmounts;
  identityPriv?: string;
}

// Validation lives here (not only in the route schema) so GraphQL and REST refuse the same things.
function parseKind(kind: unknown): StackKind {
  if (kind === undefined || kind === null) return 'human';
  if (typeof kind !== 'string' || !(STACK_KINDS as readonly string[]).includes(kind)) {
    throw badRequest(`kind must be one of ${STACK_KINDS.join(', ')}`, [{ path: 'kind', message: 'is not a known kind' }]);
  }
  return kind as StackKind;
}

function parseName(name: unknown, required: boolean): string | undefined {
  if (name === undefined && !required) return undefined;
  if (typeof name !== 'string' || name.trim() === '' || name.length > 200) {
    throw badRequest('name must be a non-empty string of at most 200 characters', [{ path: 'name', message: 'is invalid' }]);
  }
  return name;
}

function parsePubkey(pubkey: unknown): string {
  if (typeof pubkey !== 'string' || !/^[0-9a-fA-F]{64}$/.test(pubkey)) {
    throw badRequest('pubkey must be 64 hex characters (a 32-byte ed25519 public key)', [{ path: 'pubkey', message: 'is not 64 hex' }]);
  }
  const hex = pubkey.toLowerCase();
  try {
    ed.Point.fromHex(hex);
  } catch {
    throw badRequest('pubkey is not a valid ed25519 public key', [{ path: 'pubkey', message: 'is not a curve point' }]);
  }
  return hex;
}

/** `partial`: a coefficient left out is 1 (Shape A, where cpv is optional); Shape B needs all five. */
function parseCpv(cpv: unknown, partial = false): Cpv {
  if (cpv === null || typeof cpv !== 'object' || Array.isArray(cpv)) {
    throw badRequest('cpv must be an object with syncCoeff, memoryCoeff, computeCoeff, residueCoeff, routingCoeff', [{ path: 'cpv', message: 'is required' }]);
  }
  const out = {} as Cpv;
  const errors = [];
  for (const k of CPV_KEYS) {
    const v = (cpv as Record<string, unknown>)[k] ?? (partial ? 1 : undefined);
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 2) errors.push({ path: `cpv.${k}`, message: 'must be a number in [0, 2]' });
    else out[k] = v;
  }
  if (errors.length) throw badRequest(`cpv coefficients must be numbers in [0, 2]: ${errors.map((e) => e.path).join(', ')}`, errors);
  return out;
}

const cpvOf = (r: StackRow): Cpv => ({
  syncCoeff: r.syncCoeff,
  memoryCoeff: r.memoryCoeff,
  computeCoeff: r.computeCoeff,
  residueCoeff: r.residueCoeff,
  routingCoeff: r.routingCoeff,
});

/** The next identity token id (a Shape A stack's id carries it), from the Stack.tokenId sequence. */
const nextTokenId = (db: Database) => nextSerial(db, 'Stack', 'tokenId');

const isUniqueViolation = (e: unknown) => (e as { code?: string })?.code === 'P2002' || /unique/i.test(String((e as Error)?.message));

/** The agentURI of a platform stack: its ERC-8004 registration file on the gateway's public URL (COG_BASE_URL). */
export function registrationUrl(base: string, stackId: string): string {
  return `${base.replace(/\/+$/, '')}/v1/stacks/${encodeURIComponent(stackId)}/registration.json`;
}

/** Creates a stack in either shape; the creation response alone carries identityPriv (Shape A). */
export async function createStack(p: Platform, input: CreateStackInput): Promise<CreatedStack> {
  if (input === null || typeof input !== 'object') throw badRequest('body must be an object');
  const shapeB = input.pubkey !== undefined;
  const kind = parseKind(input.kind);
  let pubKey: string;
  let identityPriv: string | undefined;
  let cpv: Cpv;
  let name: string | undefined;
  if (shapeB) {
    pubKey = parsePubkey(input.pubkey);
    cpv = parseCpv(input.cpv);
    name = parseName(input.name, false);
  } else {
    name = parseName(input.name, true);
    const id = generateIdentity();
    pubKey = id.pubKey;
    identityPriv = id.identityPriv;
    // Each 1 when created with a name only; a cpv sent along is checked like Shape B's (a value
    // out of [0, 2] is a 400, not silently dropped), the coefficients it leaves out are 1.
    cpv = parseCpv(input.cpv ?? {}, true);
  }
  const epoch = p.epochs.current();
  // The stack row, the economy's accrual row with its terms, the identity NFT's mint intent and
  // the event, as one statement after the read of its token id (a Shape A id carries it): an
  // interactive transaction of six statements before (docs/decisions.md, "A spawn is one statement").
  const tokenId = await nextTokenId(p.db);
  const owner = stackAddress(pubKey);
  const id = shapeB ? `stack:${owner}` : `stack:${kind}:${tokenId}:${randomBytes(6).toString('hex')}`;
  const shape = shapeB ? 'B' : 'A';
  const exists = () => conflict('a stack with this pubkey already exists', 'STACK_EXISTS');
  let out: Record<string, unknown>;
  try {
    out = await runStatement(p.db, [
      {
        ctes: [
          {
            name: 'stack_new',
            // A pubkey (or a Shape B id, made of it) taken already inserts nothing: the check's 409.
            body: sql`INSERT INTO "Stack" (id, "tokenId", name, kind, shape, "pubKey", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "masterSecret")
              VALUES (${id}, ${tokenId}::int, ${name ?? owner}, ${kind}, ${shape}, ${pubKey}, ${cpv.syncCoeff}::float8, ${cpv.memoryCoeff}::float8,
                ${cpv.computeCoeff}::float8, ${cpv.residueCoeff}::float8, ${cpv.routingCoeff}::float8, ${wrapSecret(p.masterKey, randomSecret(32), id)})
              ON CONFLICT DO NOTHING
              RETURNING *`,
          },
        ],
        checks: [{ holds: sql`(SELECT count(*) FROM stack_new) = 1`, fail: exists }],
        outputs: [{ name: 'stack_row', expr: sql`(SELECT row_to_json(n) FROM stack_new n)` }],
      },
      // The economy's copy of the terms its emission formula reads (they never change after this),
      // and its lastActiveEpoch: emission decays from the last epoch the stack was active; creation is activity.
      openAccrualPart(
        sql`SELECT id AS "stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "bindingFloor", "bindingDecay" FROM stack_new`,
        epoch,
      ),
      newRecordIntentPart(
        { kind: 'mintIdentity', ref: id, payload: { stackId: id, tokenId, owner, cpv, agentURI: registrationUrl(p.config.urls.base, id) }, epoch },
        'stack_new',
        'stack_intent',
      ),
      eventsPart(
        [{ subject: `cog.stack.created.${id}`, type: 'stack.created', data: { stackId: id, tokenId, kind, pubKey, shape }, msgId: `stack-created:${id}` }],
        {
          handTo: p.db,
        },
      )!,
    ]);
  } catch (e) {
    // Two creations of one pubkey at once: the later one's insert waits for the first and then
    // conflicts (ON CONFLICT takes it), or a unique violation comes from another index.
    if (isUniqueViolation(e)) throw exists();
    throw e;
  }
  const row = stackFromJson(jsonValue(out.stack_row) as StackJson);
  // A new stack has no sleeves and has written no memory, so no anchors and no balances.
  const view: CreatedStack = { ...stackCore(row, epoch), sleeves: [], anchors: [], balances: { compute: 0, memory: 0, sync: 0, routing: 0, residue: 0 } };
  if (identityPriv) view.identityPriv = identityPriv;
  return view;
}

/** The stack row, or a 404 Problem. */
export async function getStackRow(db: Db | Tx, id: string): Promise<StackRow> {
  const row = typeof id === 'string' && id ? await db.stack.findUnique({ where: { id } }) : null;
  if (!row) throw notFound('Stack', String(id));
  return row;
}

/** Locks the stack row for the rest of the transaction: per-stack writes are serialised here. */
export async function lockStack(tx: Tx, id: string): Promise<StackRow> {
  await tx.$executeRaw`SELECT 1 FROM "Stack" WHERE id = ${id} FOR UPDATE`;
  return getStackRow(tx, id);
}

/** A stack's own fields; `lastActiveEpoch` is the economy's (lastActiveEpochs, or stackCores for rows). */
export function stackCore(r: StackRow, lastActiveEpoch: number): StackCore {
  return {
    id: r.id,
    tokenId: r.tokenId,
    name: r.name,
    kind: r.kind,
    pubKey: r.pubKey,
    pubkey: r.pubKey,
    epoch: r.epoch,
    cpv: cpvOf(r),
    binding: { floor: r.bindingFloor, decayRate: r.bindingDecay },
    createdAt: r.createdAt.toISOString(),
    episodicHead: r.episodicHead,
    lastActiveEpoch,
    chainStatus: r.chainStatus,
  };
}

/** The last epoch each stack was active in, as the economy keeps it (one query for any number of stacks). */
export async function lastActiveEpochsOf(db: Db | Tx, ids: readonly string[]): Promise<Map<string, number>> {
  const known = await lastActiveEpochs(db, ids);
  return new Map(ids.map((id) => [id, known.get(id) ?? NEVER_ACTIVE]));
}

/** The own fields of several stacks: one query to the economy for their lastActiveEpoch. */
export async function stackCores(db: Db | Tx, rows: readonly StackRow[]): Promise<StackCore[]> {
  const last = await lastActiveEpochsOf(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => stackCore(r, last.get(r.id)!));
}

/**
 * A stack as its list and GraphQL reads show it: the row without the secret and the head's writer,
 * createdAt as the ISO 8601 text `Date.toISOString` gives.
 */
export type StackListRow = Omit<StackRow, 'masterSecret' | 'shape' | 'headSleeveId' | 'headEpoch' | 'mirroredHead' | 'headUnmirrored' | 'createdAt'> & {
  createdAt: string;
};

/** A stack of StackListRow over the row `s`, as a json array (lib/db/statement.ts jsonRows). */
const stackListRow = jsonRows<StackListRow>([
  ['id', sql`s.id`],
  ['tokenId', sql`s."tokenId"`],
  ['name', sql`s.name`],
  ['kind', sql`s.kind`],
  ['pubKey', sql`s."pubKey"`],
  ['syncCoeff', sql`s."syncCoeff"`],
  ['memoryCoeff', sql`s."memoryCoeff"`],
  ['computeCoeff', sql`s."computeCoeff"`],
  ['residueCoeff', sql`s."residueCoeff"`],
  ['routingCoeff', sql`s."routingCoeff"`],
  ['bindingFloor', sql`s."bindingFloor"`],
  ['bindingDecay', sql`s."bindingDecay"`],
  ['epoch', sql`s.epoch`],
  ['episodicHead', sql`s."episodicHead"`],
  ['chainStatus', sql`s."chainStatus"`],
  ['createdAt', sql`s."createdAt"`, 'iso'],
]);

/** The first `first` stacks, oldest first (token order), as one read (lib/db/statement.ts readStatement): one json value, no row parsing. */
export function stacksInTokenOrderRead(first: number): ReadPart<StackListRow[]> {
  return {
    expr: sql`SELECT json_agg(${stackListRow.row} ORDER BY s."tokenId") FROM (SELECT * FROM "Stack" ORDER BY "tokenId" LIMIT ${first}::int) s`,
    parse: stackListRow.parse,
  };
}

/** The stacks of these ids that exist, in no order, as one read. */
export function stacksByIdRead(ids: readonly string[]): ReadPart<StackListRow[]> {
  return { expr: sql`SELECT json_agg(${stackListRow.row}) FROM "Stack" s WHERE s.id = ANY(${[...ids]}::text[])`, parse: stackListRow.parse };
}

/** Every stack row, oldest first. */
export function listStackRows(db: Db | Tx): Promise<StackRow[]> {
  return db.stack.findMany({ orderBy: { tokenId: 'asc' } });
}

/** Unwraps the stack's master secret. Internal only: never log, return or publish it. */
export function stackMasterSecret(p: Platform, row: Pick<StackRow, 'id' | 'masterSecret'>): Uint8Array {
  return unwrapSecret(p.masterKey, row.masterSecret, row.id);
}

/** Moves the episodic head (callers hold the stack lock). */
export async function setEpisodicHead(tx: Tx, stackId: string, cid: string, meta: { sleeveId?: string; epoch?: number } = {}): Promise<void> {
  // A write is activity: the emission accrued so far is settled before lastActiveEpoch moves.
  if (meta.epoch !== undefined) await markActive(tx, stackId, meta.epoch);
  const row = await tx.stack.update({
    where: { id: stackId },
    data: {
      episodicHead: cid,
      ...(meta.epoch !== undefined ? { epoch: meta.epoch, headEpoch: meta.epoch } : {}),
      ...(meta.sleeveId !== undefined ? { headSleeveId: meta.sleeveId } : {}),
      // The identity NFT holds the old head until the next heads mirror (stackHeads, below).
      chainStatus: 'pending',
    },
    select: { id: true },
  });
  if (!row) throw notFound('Stack', stackId);
}

/** A group commit's head move found the head moved by another writer since it was read: the caller retries. */
export class HeadMoved extends Error {
  constructor(readonly stackId: string) {
    super(`stack ${stackId}: the episodic head moved meanwhile`);
  }
}

/** One stack's head move in a group commit: its nodes were chained onto `from` before the statement. */
export interface HeadMove {
  stack: Pick<StackRow, 'id' | 'headEpoch'>;
  from: string | null;
  to: string;
  sleeveId: string;
}

/**
 * A group commit's head moves (setEpisodicHead for each stack of the batch, one move a stack), as
 * the first part of the write's one statement (lib/db/statement.ts): the stack rows locked in id
 * order (two batches over the same stacks never deadlock), then one conditional UPDATE that checks
 * each head is still its `from` (else HeadMoved: the statement is undone and the caller retries from
 * a fresh read) and moves it to its `to`. The rows stay locked to the end of the statement, so the
 * rest of the write commits against these heads. Marks the stacks active in `epoch` (the economy's
 * part, left out for a stack whose head read with `from` had already moved in `epoch`: see
 * headMovedSince; planning it costs even when it would do nothing). The chain record goes pending:
 * the identity NFT holds the old head until the next heads mirror (stackHeads), as after
 * setEpisodicHead.
 */
export function headMovePart(moves: readonly HeadMove[], epoch: number): StatementPart {
  if (new Set(moves.map((m) => m.stack.id)).size !== moves.length) throw new Error('headMovePart: one move a stack');
  const ids = moves.map((m) => m.stack.id).sort();
  const rows = moves.map((m) => ({ id: m.stack.id, from: m.from, to: m.to, sleeveId: m.sleeveId }));
  // The head is still `from` when the statement applies, so its headEpoch is the one read with it.
  const due = moves.filter((m) => !headMovedSince(m.stack.headEpoch, epoch)).map((m) => m.stack.id);
  return joinParts(
    {
      ctes: [
        { name: 'stack_lock', body: sql`SELECT id FROM "Stack" WHERE id = ANY(${ids}::text[]) ORDER BY id FOR UPDATE` },
        {
          name: 'stack_head',
          body: sql`UPDATE "Stack" s SET "episodicHead" = v."to", epoch = ${epoch}::int, "headEpoch" = ${epoch}::int,
              "headSleeveId" = v."sleeveId", "chainStatus" = 'pending'
            FROM stack_lock l, jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id text, "from" text, "to" text, "sleeveId" text)
            WHERE l.id = v.id AND s.id = v.id AND s."episodicHead" IS NOT DISTINCT FROM v."from" RETURNING s.id`,
        },
      ],
      checks: [{ holds: sql`(SELECT count(*) FROM stack_head) = ${moves.length}::int`, fail: () => new HeadMoved(ids.join(', ')) }],
    },
    due.length ? markActivePart(due, epoch) : null,
  );
}

/** A Stack row as row_to_json gives it: the timestamp as text. */
type StackJson = Omit<StackRow, 'createdAt'> & { createdAt: string };
const stackFromJson = (r: StackJson): StackRow => ({ ...r, createdAt: new Date(r.createdAt) });

/** Stack rows by id as one read of a read statement (lib/db/statement.ts readStatement); an unknown id is absent. */
export function stackRowsRead(ids: readonly string[]): ReadPart<Map<string, StackRow>> {
  return {
    expr: sql`SELECT json_agg(row_to_json(s)) FROM "Stack" s WHERE s.id = ANY(${[...ids]}::text[])`,
    parse: (v) => new Map(((jsonValue(v) as StackJson[] | null) ?? []).map((r) => [r.id, stackFromJson(r)])),
  };
}

/** What a write reads of its stack (writeStacksRead). */
export type WriteStack = Pick<StackRow, 'id' | 'tokenId' | 'masterSecret' | 'episodicHead' | 'headSleeveId' | 'headEpoch'>;

/** The stacks a batch of writes plans against, by id (an unknown id is absent), as one read of a read statement (lib/db/statement.ts readStatement). */
export function writeStacksRead(ids: readonly string[]): ReadPart<Map<string, WriteStack>> {
  const unique = [...new Set(ids)].filter((id) => typeof id === 'string' && id);
  return {
    expr: sql`SELECT json_agg(json_build_object('id', id, 'tokenId', "tokenId", 'masterSecret', "masterSecret", 'episodicHead', "episodicHead",
        'headSleeveId', "headSleeveId", 'headEpoch', "headEpoch")) FROM "Stack" WHERE id = ANY(${unique}::text[])`,
    parse: (v) => new Map(((jsonValue(v) as WriteStack[] | null) ?? []).map((r) => [r.id, r])),
  };
}

/**
 * Epoch keys already derived, per platform: a stack's key for an epoch is the same for every write
 * and read of that epoch, and deriving it (unwrapping the master secret, then HKDF-SHA512) cost more
 * than sealing the node. Bounded; the oldest entry goes first. Keyed on the wrapped secret too, so a
 * row that is not the one the key was derived from never gets it.
 */
const EPOCH_KEYS_MAX = 16_384;
const epochKeys = new WeakMap<Platform, Map<string, { wrapped: string; key: Uint8Array }>>();

/** The stack's key for `epoch` (epochKey over its unwrapped master secret), derived once. Internal only: never log, return or publish it. */
export function stackEpochKey(p: Platform, row: Pick<StackRow, 'id' | 'masterSecret'>, epoch: number): Uint8Array {
  let cache = epochKeys.get(p);
  if (!cache) epochKeys.set(p, (cache = new Map()));
  const k = `${row.id}\u0000${epoch}`;
  const hit = cache.get(k);
  if (hit && hit.wrapped === row.masterSecret) return hit.key;
  const key = epochKey(stackMasterSecret(p, row), row.id, epoch);
  if (cache.size >= EPOCH_KEYS_MAX) cache.delete(cache.keys().next().value!);
  cache.set(k, { wrapped: row.masterSecret, key });
  return key;
}

/**
 * Whether a head move in `epoch` or later already marked the stack active in `epoch`: every head
 * move stamped with an epoch marks the stack active in that epoch in its own transaction
 * (setEpisodicHead, headMovePart), and the economy's lastActiveEpoch never goes back, so it is
 * at least the headEpoch of any committed version of the row. Then markActive would be a no-op,
 * and the stacks context skips it using its own column, without asking the economy.
 */
const headMovedSince = (headEpoch: number | null, epoch: number) => headEpoch !== null && headEpoch >= epoch;

/**
 * Spending marks a stack active in the epoch (EBC decay counts the quiet epochs since). Locks the
 * stack row, as every stack write does: the lock serialises the stack's writers.
 */
export async function markStackActive(tx: Tx, stackId: string, epoch: number): Promise<void> {
  const [row] = await tx.$queryRaw<Array<{ headEpoch: number | null }>>`SELECT "headEpoch" FROM "Stack" WHERE id = ${stackId} FOR UPDATE`;
  // The emission accrued so far is settled before lastActiveEpoch moves (economy accrual.ts).
  if (row && !headMovedSince(row.headEpoch, epoch)) await markActive(tx, stackId, epoch);
}

/**
 * markStackActive's lock as part of a statement the caller composes (a read's spend, sleeves'
 * spendForRead and sync): the stack row locked first, as every stack writer locks it; `missing`
 * when there is no such row (the statement is undone). The CTE `spend_lock` holds the row as
 * locked (id, "episodicHead"): a head moved by a writer the lock waited for is the new one there,
 * where the statement's own snapshot would still show the old.
 */
export function spendLockPart(stackId: string, missing: () => Error): StatementPart {
  return {
    ctes: [{ name: 'spend_lock', body: sql`SELECT id, "episodicHead" FROM "Stack" WHERE id = ${stackId} FOR UPDATE` }],
    checks: [{ holds: sql`(SELECT count(*) FROM spend_lock) = 1`, fail: missing }],
  };
}

/** What a memory read needs of a stack (id, head, wrapped secret), as a SELECT of one row or none. */
export type StackReadRow = Pick<StackRow, 'id' | 'episodicHead' | 'masterSecret'>;
/** A stack's episodic head as an SQL expression over a stack id expression (null for no such stack). */
export const stackHeadSql = (stackId: Sql): Sql => sql`(SELECT "episodicHead" FROM "Stack" WHERE id = ${stackId})`;
export const stackReadSql = (stackId: string): Sql => sql`SELECT id, "episodicHead", "masterSecret" FROM "Stack" WHERE id = ${stackId}`;

/** A stack's id, identity token and head as a SELECT (no row when unknown), for a statement that creates on it (a sleeve's spawn). */
export const stackTokenAndHeadSql = (stackId: string): Sql => sql`SELECT id, "tokenId", "episodicHead" FROM "Stack" WHERE id = ${stackId}`;

/** Which of these ids are stacks. */
export async function existingStackIds(db: Db | Tx, ids: readonly string[]): Promise<string[]> {
  if (!ids.length) return [];
  return (await db.stack.findMany({ where: { id: { in: [...ids] } }, select: { id: true } })).map((s) => s.id);
}

/** A stack's ed25519 public key (what its signed requests verify against), or null when unknown. */
export async function stackPubKey(db: Db | Tx, id: string): Promise<string | null> {
  if (typeof id !== 'string' || !id || id.length > 512) return null;
  return (await db.stack.findUnique({ where: { id }, select: { pubKey: true } }))?.pubKey ?? null;
}

/**
 * The chain outbox's writer of the stacks' chainStatus (wired by bin/assembly.ts). A stack's chain
 * record is confirmed only once the NFT holds its head too: until then it stays pending.
 */
export const stackChainRecords: MirroredTable = {
  lockFree: (tx, ids) => lockFreeRows(tx, '"Stack"', ids),
  setChainStatuses: async (tx, rows) => {
    if (!rows.length) return;
    await tx.$executeRaw`UPDATE "Stack" s SET "chainStatus" = CASE WHEN v.status = 'confirmed' AND s."episodicHead" IS DISTINCT FROM s."mirroredHead"
        THEN 'pending' ELSE v.status END
      FROM unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.status)}::text[]) AS v(id, status) WHERE s.id = v.id`;
  },
};

/**
 * The heads mirror's reads and writes of the stacks (wired by bin/assembly.ts): the chains send the
 * moved heads of many stacks in one call once an epoch (docs/decisions.md, "Heads mirrored once an
 * epoch").
 */
/**
 * One range of the stacks whose head the chain does not hold, on the partial index
 * "Stack_unmirrored_head_idx" (of the generated column "headUnmirrored": episodicHead set and not
 * the mirrored one): O(limit), whatever the number of stacks.
 */
export const unmirroredHeadsQuery = (limit: number, after = ''): Sql =>
  sql`SELECT id AS "stackId", "tokenId", "episodicHead" AS head, "headEpoch" AS epoch FROM "Stack"
      WHERE "headUnmirrored" AND id > ${after} ORDER BY id LIMIT ${limit}`;

export const stackHeads: StackHeads = {
  unmirrored: async (db, limit, after) =>
    (await db.$queryRaw<Array<{ stackId: string; tokenId: number; head: string; epoch: number | null }>>(unmirroredHeadsQuery(limit, after))).map((r) => ({
      ...r,
      epoch: r.epoch ?? 0,
    })),
  // The chain holds these heads now; a stack whose head is still the one mirrored (and with no other
  // intent outstanding: `confirm`) has its chain record confirmed. One statement, which never waits
  // for a writer: a row a write holds (its head moving on) is left apart, and its new head goes
  // with the next mirror anyway. Waiting, it queued behind each batch of writes over those stacks in
  // turn (and, locking in another order than they do, deadlocked with them: seconds a round).
  mirrored: async (db, heads) => {
    if (!heads.length) return;
    await db.$executeRaw`WITH v AS (SELECT * FROM jsonb_to_recordset(${JSON.stringify(heads)}::jsonb) AS v("stackId" text, head text, confirm boolean)),
        free AS (SELECT id FROM "Stack" WHERE id = ANY(ARRAY(SELECT "stackId" FROM v)) ORDER BY id FOR UPDATE SKIP LOCKED)
      UPDATE "Stack" s SET "mirroredHead" = v.head,
        "chainStatus" = CASE WHEN v.confirm AND s."episodicHead" IS NOT DISTINCT FROM v.head THEN 'confirmed' ELSE s."chainStatus" END
      FROM v, free WHERE s.id = v."stackId" AND s.id = free.id`;
  },
};
