// The Hippocampus DAG store: the index (links, epoch, pin, write order) in MemoryNode, and each
// node's payload (ciphertext JSON text) either in its index row (the platform's own writes:
// indexNodesPart stores both in the write's one statement) or in the object store under
// `dag/<sha256>` (nodes PUT through the Hippocampus API, replicated to its peers, and every node
// written before payloads moved into the row). A reader takes the row's payload when it has one,
// else the object. It only ever holds ciphertext: no key, no plaintext passes through here.
import { sql, type Database, type Db, type Sql, type Tx } from '../../../lib/db/index.ts';
import { numberedSql, queryPrepared, type StatementPart } from '../../../lib/db/statement.ts';
import type { ObjectStore } from '../../../lib/objects/port.ts';
import type { Platform } from '../../../lib/platform.ts';
import { Problem, badRequest, notFound } from '../../../lib/errors.ts';
import type { Sealed } from '../../../lib/crypto.ts';
import { computeCid, computeDataCid, parseCid, payloadKey } from './cid.ts';

/** Readable when the reader's epoch is within this many epochs of the node's (unless pinned). */
export const GATING_WINDOW = 2;
export const MAX_WALK_DEPTH = 10_000;
export const MAX_LINKS = 64;
export const WRITE_KINDS = ['episodic', 'perceive', 'remember'] as const;

export interface PutNodeInput {
  cid: string;
  data: string;
  links: string[];
  epoch: number;
  stackId: string;
  kind?: string;
  pinned?: boolean;
  sleeveId?: string | null;
}

/** The spec's Memory node. */
export interface DagNode {
  cid: string;
  /** The payload as a ciphertext object; null when a client stored an opaque payload (then `data`). */
  ciphertext: Sealed | null;
  data?: string;
  links: string[];
  epoch: number;
  kind: 'episodic';
  pinned: boolean;
  stackId: string;
}

export interface WalkResult {
  nodes: DagNode[];
  gated: string[];
  missing: string[];
  /** Levels that held at least one CID (what a recall pays for). */
  levels: number;
}

type NodeRow = { cid: string; stackId: string; epoch: number; links: string[]; pinned: boolean; writeSeq: bigint; payload: string | null };

export const isReadable = (node: { epoch: number; pinned: boolean }, readerEpoch: number) => node.pinned || Math.abs(readerEpoch - node.epoch) <= GATING_WINDOW;

const gone = (cid: string) => new Problem(410, 'GATED', 'Gone', `node ${cid} is outside the epoch-gating window and not pinned`);

const LOWER_HEX = /^[0-9a-f]*$/;
/** A sealed payload's hex: a 12-byte iv, and a ciphertext of at least the 16-byte tag. */
const IV_HEX = 24;
const MIN_CT_HEX = 32;

function parseCiphertext(data: string): Sealed | null {
  try {
    const o = JSON.parse(data) as Record<string, unknown>;
    if (o === null || typeof o !== 'object' || Array.isArray(o)) return null;
    if (o.v !== 1 || typeof o.iv !== 'string' || typeof o.ct !== 'string') return null;
    // Lower-case hex: a 12-byte iv, and at least the 16-byte tag (one character class over the
    // string, not a group a byte: this runs for every node of a walk).
    if (o.iv.length !== IV_HEX || o.ct.length < MIN_CT_HEX || o.ct.length % 2 !== 0 || !LOWER_HEX.test(o.iv) || !LOWER_HEX.test(o.ct)) return null;
    return { iv: o.iv, ct: o.ct, v: 1 };
  } catch {
    return null;
  }
}

/** Checks a PUT against the content address and the chain's epoch; throws a 400 Problem. */
export function validatePut(n: PutNodeInput, currentEpoch: number): { hash: string; ciphertext: Sealed | null } {
  if (!Number.isSafeInteger(n.epoch) || n.epoch < 0) throw badRequest('epoch must be a non-negative integer');
  if (n.epoch > currentEpoch + 1) throw badRequest(`epoch ${n.epoch} is in the future of the chain (current ${currentEpoch})`);
  if (typeof n.stackId !== 'string' || !n.stackId || n.stackId.length > 200) throw badRequest('stackId must be a non-empty string');
  if (!Array.isArray(n.links) || n.links.length > MAX_LINKS) throw badRequest(`links must be an array of at most ${MAX_LINKS} CIDs`);
  for (const l of n.links) if (!parseCid(l)) throw badRequest(`link ${JSON.stringify(String(l)).slice(0, 100)} is not a cog:// CID`);
  if (new Set(n.links).size !== n.links.length) throw badRequest('links must not repeat a CID');
  if (n.kind !== undefined && !(WRITE_KINDS as readonly string[]).includes(n.kind)) throw badRequest(`kind must be one of ${WRITE_KINDS.join(', ')}`);
  if (typeof n.data !== 'string' || n.data.length === 0)
    throw badRequest('data must be a non-empty string (the encrypted payload; the platform sends the ciphertext object as JSON text)');
  // The platform's payloads are ciphertext objects; other clients' payloads are opaque strings.
  const ciphertext = parseCiphertext(n.data);
  const parsed = parseCid(n.cid);
  if (!parsed) throw badRequest('cid must have the form cog://<sha256 hex>@<epoch>');
  if (parsed.epoch !== n.epoch) throw new Problem(400, 'CID_MISMATCH', 'Bad request', `cid names epoch ${parsed.epoch} but the node's epoch is ${n.epoch}`);
  if (computeCid(n) !== n.cid && computeDataCid(n) !== n.cid) {
    throw new Problem(
      400,
      'CID_MISMATCH',
      'Bad request',
      `cid does not address the content (expected ${computeDataCid(n)} or ${computeCid(n)}; see docs/decisions.md)`,
    );
  }
  return { hash: parsed.hash, ciphertext };
}

/** A node's MemoryNode row without its payload (which putNode keeps in the object store and indexNodesPart inline). */
const indexRow = (n: PutNodeInput) => ({
  cid: n.cid,
  stackId: n.stackId,
  epoch: n.epoch,
  links: n.links,
  kind: n.kind ?? 'episodic',
  pinned: n.pinned ?? false,
  sleeveId: n.sleeveId ?? null,
  size: Buffer.byteLength(n.data),
});

/** Stores a node (idempotent: the same content is the same CID). Returns whether it was new. */
export async function putNode(db: Db | Tx, objects: ObjectStore, n: PutNodeInput, currentEpoch: number): Promise<{ created: boolean }> {
  const { hash } = validatePut(n, currentEpoch);
  // Payload first: an index row never points at nothing. Same content, same key: a re-put is harmless.
  await objects.put(payloadKey(hash), new TextEncoder().encode(n.data));
  // The index row and its stack's write epoch (writeEpochsSql) in one statement.
  const r = indexRow(n);
  const [row] = await db.$queryRaw<Array<{ created: number }>>`
    WITH node AS (
      INSERT INTO "MemoryNode" (cid, "stackId", epoch, links, kind, pinned, "sleeveId", size)
      VALUES (${r.cid}, ${r.stackId}, ${r.epoch}::int, ${r.links}::text[], ${r.kind}, ${r.pinned}, ${r.sleeveId}, ${r.size}::int)
      ON CONFLICT (cid) DO NOTHING RETURNING "stackId", epoch),
    write_epoch AS (INSERT INTO "MemoryWriteEpoch" ("stackId", epoch) SELECT "stackId", epoch FROM node ON CONFLICT DO NOTHING)
    SELECT count(*)::int AS created FROM node`;
  const count = row?.created ?? 0;
  if (count === 0 && n.pinned) await db.memoryNode.updateMany({ where: { cid: n.cid, pinned: false }, data: { pinned: true } });
  return { created: count === 1 };
}

/**
 * Nodes with their payloads, in order (their write order), as part of a composed statement
 * (lib/db/statement.ts): the write's own, so the payload commits with the index row, the burn and
 * the head move, and a refused write leaves nothing at all. The nodes were sealed and addressed by
 * the writer (sealNodeWith): no object store write, no network call. Their chain positions
 * (docs/decisions.md, "Recall: the stored chain") are set here for a whole run at once: a node
 * without links is 1, the k-th node of a run chained onto `base` (each linking to the one before)
 * is base's position + k, from one index probe per base; the insert trigger, which ran a plpgsql
 * lookup per row (half the write statement's time on PGlite), is left for nodes with several links.
 */
export function indexNodesPart(nodes: readonly PutNodeInput[]): StatementPart | null {
  if (!nodes.length) return null;
  // Each node's run: its base (the node before the run, null for a run starting without links) and place in it.
  const runs = new Map<string, { base: string | null; k: number; stackId: string }>();
  const rows = nodes.map((n) => {
    let chain: { base: string | null; k: number } | null = null;
    if (n.links.length === 0) chain = { base: null, k: 1 };
    else if (n.links.length === 1) {
      const prev = runs.get(n.links[0]!);
      chain = prev && prev.stackId === n.stackId ? { base: prev.base, k: prev.k + 1 } : { base: n.links[0]!, k: 1 };
    }
    // Members listed or assigned, not spread into a literal that adds more: V8's slow path, 3.3 µs a
    // row (docs/decisions.md).
    if (chain) runs.set(n.cid, { base: chain.base, k: chain.k, stackId: n.stackId });
    return Object.assign(indexRow(n), { payload: n.data, chained: chain !== null, base: chain?.base ?? null, k: chain?.k ?? null });
  });
  // The rows are one parameter, read once: the chain's bases and the insert both take them from
  // memory_rows (the same JSON twice was a fifth of a group commit's bytes on the wire).
  return {
    ctes: [
      {
        name: 'memory_rows',
        body: sql`SELECT * FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
            AS (cid text, "stackId" text, epoch int, links text[], kind text, pinned boolean, "sleeveId" text, size int, payload text, chained boolean, base text, k int))
            WITH ORDINALITY AS r(cid, "stackId", epoch, links, kind, pinned, "sleeveId", size, payload, chained, base, k, n)`,
      },
      {
        name: 'memory_chain',
        body: sql`SELECT b.base, p."chainPos" AS pos
          FROM (SELECT DISTINCT base, "stackId" FROM memory_rows WHERE base IS NOT NULL) b
          JOIN "MemoryNode" p ON p.cid = b.base AND p."stackId" = b."stackId"`,
      },
      {
        name: 'memory_nodes',
        body: sql`INSERT INTO "MemoryNode" (cid, "stackId", epoch, links, kind, pinned, "sleeveId", size, payload, "chainPos")
          SELECT r.cid, r."stackId", r.epoch, r.links, r.kind, r.pinned, r."sleeveId", r.size, r.payload,
            CASE WHEN r.chained THEN (CASE WHEN r.base IS NULL THEN r.k ELSE (SELECT c.pos FROM memory_chain c WHERE c.base = r.base) + r.k END) END
          FROM memory_rows r
          ORDER BY r.n
          ON CONFLICT (cid) DO UPDATE SET pinned = "MemoryNode".pinned OR EXCLUDED.pinned, payload = COALESCE("MemoryNode".payload, EXCLUDED.payload)`,
      },
      {
        // The stacks' write epochs (writeEpochsSql), with the nodes.
        name: 'memory_write_epochs',
        body: sql`INSERT INTO "MemoryWriteEpoch" ("stackId", epoch) SELECT DISTINCT "stackId", epoch FROM memory_rows ON CONFLICT DO NOTHING`,
      },
    ],
  };
}

type Payload = { ciphertext: Sealed | null; data: string };

const inlinePayload = (data: string): Payload => ({ ciphertext: parseCiphertext(data), data });

// The platform's sealed JSON, as JSON.stringify(seal(...)) writes it: {"iv":"<24 hex>","ct":"<hex>","v":1}.
const SEALED_HEAD = '{"iv":"';
const SEALED_MID = '","ct":"';
const SEALED_TAIL = '","v":1}';
const SEALED_CT_AT = SEALED_HEAD.length + IV_HEX + SEALED_MID.length;

/**
 * A row's payload: the platform's own sealed JSON (indexNodesPart is the column's only writer), read
 * by position instead of JSON.parse and the lower-case hex pass, which were a fifth of a
 * depth-1000 walk's JavaScript. Its hex digits are checked where open() decodes them (a digit that
 * is not hex fails the decode, so the node is undecryptable, as parseCiphertext would have made it).
 * Anything not in exactly that form is read the general way.
 */
function rowPayload(data: string): Payload {
  if (
    data.length >= SEALED_CT_AT + MIN_CT_HEX + SEALED_TAIL.length &&
    data.startsWith(SEALED_HEAD) &&
    data.startsWith(SEALED_MID, SEALED_HEAD.length + IV_HEX) &&
    data.endsWith(SEALED_TAIL)
  ) {
    const iv = data.slice(SEALED_HEAD.length, SEALED_HEAD.length + IV_HEX);
    const ct = data.slice(SEALED_CT_AT, data.length - SEALED_TAIL.length);
    if (ct.length % 2 === 0 && !iv.includes('"') && !iv.includes('\\') && !ct.includes('"') && !ct.includes('\\'))
      return { ciphertext: { iv, ct, v: 1 }, data };
  }
  return inlinePayload(data);
}

async function loadPayload(objects: ObjectStore, cid: string): Promise<Payload | null> {
  const parsed = parseCid(cid);
  if (!parsed) return null;
  const bytes = await objects.get(payloadKey(parsed.hash));
  if (!bytes) return null;
  return inlinePayload(new TextDecoder().decode(bytes));
}

/**
 * The walk's cache of payloads from the object store (rows without their payload), one per store:
 * payloads are content-addressed, so an entry can
 * never be stale; it is filled by walks (not by writes), bounded by size (least recently used out
 * first) and emptied of what pruneForgotten deletes. A walk still reads the index (what exists,
 * what is gated) from the database every time; only the immutable bytes come from here. Single
 * reads (GET /dag/:cid) and shard checks (meta: is it stored?) go to the store itself.
 */
export const WALK_CACHE_BYTES = 32 * 1024 * 1024;
class PayloadCache {
  private readonly entries = new Map<string, Payload>();
  private bytes = 0;
  get(cid: string): Payload | undefined {
    const v = this.entries.get(cid);
    if (v) this.entries.delete(cid), this.entries.set(cid, v); // most recent last
    return v;
  }
  set(cid: string, v: Payload): void {
    if (this.entries.has(cid)) return;
    this.entries.set(cid, v);
    this.bytes += v.data.length;
    for (const [k, old] of this.entries) {
      if (this.bytes <= WALK_CACHE_BYTES) break;
      this.entries.delete(k);
      this.bytes -= old.data.length;
    }
  }
  delete(cid: string): void {
    const v = this.entries.get(cid);
    if (v) this.entries.delete(cid), (this.bytes -= v.data.length);
  }
}
const walkCaches = new WeakMap<ObjectStore, PayloadCache>();
const walkCache = (objects: ObjectStore) => walkCaches.get(objects) ?? walkCaches.set(objects, new PayloadCache()).get(objects)!;

/** Payload reads a walk keeps in flight at once (a thousand at once only queue in the thread pool). */
const READ_CONCURRENCY = 16;

/** The payloads of a walk's nodes, in order: cached ones from memory, the rest read at most READ_CONCURRENCY at a time. */
async function loadPayloads(objects: ObjectStore, cids: string[]): Promise<Array<Payload | null>> {
  const cache = walkCache(objects);
  const out: Array<Payload | null> = cids.map((c) => cache.get(c) ?? null);
  const misses = out.flatMap((v, i) => (v ? [] : [i]));
  let next = 0;
  const worker = async () => {
    while (next < misses.length) {
      const i = misses[next++]!;
      const v = await loadPayload(objects, cids[i]!);
      if (v) cache.set(cids[i]!, v), (out[i] = v);
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, misses.length) }, worker));
  return out;
}

const toDagNode = (r: NodeRow, payload: Payload): DagNode => ({
  cid: r.cid,
  ciphertext: payload.ciphertext,
  ...(payload.ciphertext ? {} : { data: payload.data }),
  links: r.links,
  epoch: r.epoch,
  kind: 'episodic',
  pinned: r.pinned,
  stackId: r.stackId,
});

export function checkReaderEpoch(epoch: unknown, currentEpoch: number): number {
  if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 0) throw badRequest('epoch must be a non-negative integer');
  if (epoch > currentEpoch) throw badRequest(`epoch ${epoch} is in the future of the chain (current ${currentEpoch})`);
  return epoch;
}

/** GET /dag/:cid: 404 unknown, 410 gated, the node otherwise. */
export async function readNode(db: Db | Tx, objects: ObjectStore, cid: string, readerEpoch: number): Promise<DagNode> {
  const row = parseCid(cid) ? await db.memoryNode.findUnique({ where: { cid } }) : null;
  if (!row) throw notFound('Memory node', cid);
  if (!isReadable(row, readerEpoch)) throw gone(cid);
  const ct = row.payload !== null ? rowPayload(row.payload) : await loadPayload(objects, cid);
  if (!ct) throw notFound('Memory node payload', cid);
  return toDagNode(row, ct);
}

/** Index metadata of a node (links are metadata: never gated) and whether its payload is stored; null when unknown. */
export async function nodeMeta(
  db: Db | Tx,
  objects: ObjectStore,
  cid: string,
): Promise<{ cid: string; stackId: string; epoch: number; links: string[]; pinned: boolean; stored: boolean } | null> {
  const parsed = parseCid(cid);
  const row = parsed ? await db.memoryNode.findUnique({ where: { cid } }) : null;
  if (!row) return null;
  const stored = row.payload !== null || (await objects.has(payloadKey(parsed!.hash)));
  return { cid: row.cid, stackId: row.stackId, epoch: row.epoch, links: row.links, pinned: row.pinned, stored };
}

/**
 * A node's stack and pin state, and whether its payload is in its row (the platform's own writes)
 * rather than in a Hippocampus node's store (a payload PUT through the Hippocampus API, which its
 * node replicates to its peers when pinned); null when the CID is unknown (or not a CID).
 */
export async function nodePinState(db: Db | Tx, cid: string): Promise<{ stackId: string; pinned: boolean; inRow: boolean } | null> {
  if (typeof cid !== 'string' || !parseCid(cid)) return null;
  const rows = await db.$queryRaw<Array<{ stackId: string; pinned: boolean; inRow: boolean }>>`
    SELECT "stackId", pinned, payload IS NOT NULL AS "inRow" FROM "MemoryNode" WHERE cid = ${cid}`;
  return rows[0] ?? null;
}

/**
 * The pin as a part of a caller's statement (the pin route: a sleeve's spend and the pin commit
 * together, lib/db/statement.ts): the node, of `stackId` and not pinned yet, is pinned. `raced`
 * when there is no such row: pinned (or pruned) since the caller read it, as its next read tells.
 */
export function pinNodePart(cid: string, stackId: string, raced: () => Error): StatementPart {
  return {
    ctes: [{ name: 'node_pin', body: sql`UPDATE "MemoryNode" SET pinned = true WHERE cid = ${cid} AND "stackId" = ${stackId} AND NOT pinned RETURNING 1` }],
    checks: [{ holds: sql`(SELECT count(*) FROM node_pin) = 1`, fail: raced }],
  };
}

export async function pinStored(db: Db | Tx, cid: string): Promise<{ cid: string; pinned: true; already: boolean }> {
  const row = parseCid(cid) ? await db.memoryNode.findUnique({ where: { cid } }) : null;
  if (!row) throw notFound('Memory node', cid);
  if (!row.pinned) await db.memoryNode.update({ where: { cid }, data: { pinned: true } });
  return { cid, pinned: true, already: row.pinned };
}

/**
 * A walk's rows as its queries return them: text values (chunks) of at most WALK_CHUNK_ROWS rows
 * of one stack each, records separated by RS (0x1e): first the stack's id as a JSON string, then
 * the rows, fields separated by US (0x1f): cid, epoch, pinned, writeSeq, the links joined by
 * spaces, the payload ('' when it is in the object store). No field can hold a separator: CIDs are
 * `cog://<hex>@<epoch>`, the stackId is JSON (which escapes control characters), and a row's
 * payload is the platform's sealed JSON (indexNodesPart is its only writer), which holds none raw
 * either. At depth 1000 PGlite built this text in 1.6 ms where json_agg over json_build_array took
 * 4.6 (the payload escaped inside a JSON string a second time; the stackId's JSON in every row was
 * another 0.35), and splitting it beats JSON.parse.
 */
const RS = '\x1e';
const US = '\x1f';
const WALK_ROW = `n.cid || E'\\x1f' || n.epoch || E'\\x1f' || n.pinned::text || E'\\x1f' || n."writeSeq" || E'\\x1f' || array_to_string(n.links, ' ') || E'\\x1f' || COALESCE(n.payload, '')`;
/** A chunk from its stack's id and its rows (an aggregate over rows grouped by stack). */
const walkChunk = (stackId: string, rows: string) => `to_json(${stackId})::text || E'\\x1e' || string_agg(${rows}, E'\\x1e')`;
/**
 * Rows per chunk: about 45 kB of text. A string above V8's 128 kB large-object limit gets pages of
 * its own, and on this machine their page faults made one 400 kB text cost 1.3 ms to decode where
 * four of 100 kB took 0.05 (the walk at depth 1000: 3.5 ms as one value, 2.3 in chunks of 100).
 */
const WALK_CHUNK_ROWS = 100;

/**
 * The index rows of a walk, in one query, straight through the driver (a read of committed rows:
 * PGlite runs it between transactions, pg on a pool connection; Prisma's row mapping cost more
 * than the query at depth 1000). The rows come back as a few text chunks (WALK_ROW): PGlite's
 * protocol parsing of a thousand six-column rows (a text[] and an int8 each) took 10 ms.
 * `chain`: the stored chain (docs/decisions.md): every node with at most one link has its position
 * on its stack's chain (chainPos, set by a trigger on insert), so the `depth` nodes below a chained
 * head are one index range. It may hold nodes of a fork beside the head's line (the walk follows
 * links and ignores them); a gap (a pruned or foreign node) or an unchained head makes the caller
 * fall back to the recursive query over the links.
 */
async function walkRows(db: Database, root: string, depth: number, how: 'chain' | 'links'): Promise<NodeRow[]> {
  const q =
    how === 'chain'
      ? walkChainSql(sql`${root}`, sql`${depth}`)
      : numberedSql(
          `WITH RECURSIVE w(cid, lvl) AS (
             SELECT $1::text, 1
             UNION
             SELECT l, w.lvl + 1 FROM w JOIN "MemoryNode" n ON n.cid = w.cid CROSS JOIN LATERAL unnest(n.links) AS l WHERE w.lvl < $2::int
           )
           SELECT ${walkChunk('s', 'r')} AS chunk FROM (
             SELECT n."stackId" AS s, ${WALK_ROW} AS r, (row_number() OVER (PARTITION BY n."stackId")) / ${WALK_CHUNK_ROWS} AS g
             FROM "MemoryNode" n WHERE n.cid IN (SELECT DISTINCT cid FROM w)
           ) x GROUP BY s, g`,
          [root, depth],
        );
  const rows = await queryPrepared<{ chunk: string }>(db, q);
  return parseWalkRows(rows.map((r) => r.chunk));
}

/**
 * The stored-chain walk query (walkRows' `chain`) over a root and a depth expression: rows of one
 * column, `chunk`, none when the root is unknown or unchained. walkRows runs it alone; a caller
 * may compose it into a read of its own (recall joins it, LATERAL, to the stack and its payer: one
 * statement), and walkFromChainRows reads the chunks.
 */
export const walkChainSql = (root: Sql, depth: Sql): Sql => {
  // Each chunk is its own index range (positions k*100 .. k*100+99 within the walk, from its
  // lowest position `lo` to the head's), aggregated as the index returns it: grouping the whole
  // range by chainPos / 100 sorted its thousand row texts first (1.7-2.2 ms for the walk at depth
  // 1000 on PGlite, 1.5-1.6 this way). A range with no rows (a gap) gives no chunk.
  const per = numberedSql(String(WALK_CHUNK_ROWS), []);
  return sql`SELECT c.chunk FROM "MemoryNode" h
    CROSS JOIN LATERAL (SELECT GREATEST(h."chainPos" - (${depth})::int + 1, 1)) AS span(lo)
    CROSS JOIN LATERAL generate_series(span.lo / ${per}, h."chainPos" / ${per}) AS g(k)
    CROSS JOIN LATERAL (SELECT ${numberedSql(walkChunk('h."stackId"', WALK_ROW), [])} AS chunk FROM "MemoryNode" n
      WHERE n."stackId" = h."stackId" AND n."chainPos" >= GREATEST(g.k * ${per}, span.lo)
        AND n."chainPos" <= LEAST(g.k * ${per} + ${per} - 1, h."chainPos")) c
    WHERE h.cid = ${root} AND c.chunk IS NOT NULL`;
};

/**
 * The walk (walkDag's) from the chunks walkChainSql read, when they cover it: no level with a CID
 * the rows lack (which the query over the links, or nothing, would fill) and every readable node's
 * payload in its row (the platform's own writes). Otherwise undefined: the caller walks through the
 * Hippocampus, which has the links query, the object store and its peers.
 */
export function walkFromChainRows(chunks: readonly string[], root: string, depth: number, readerEpoch: number): WalkResult | undefined {
  if (!parseCid(root)) return undefined;
  const { out, readable } = bfs(parseWalkRows(chunks), root, depth, readerEpoch);
  if (out.missing.length) return undefined;
  for (const r of readable) {
    if (r.payload === null) return undefined;
    out.nodes.push(toDagNode(r, rowPayload(r.payload)));
  }
  return out;
}

/** Reads the walk's chunks; a chunk or a row not in their form is an error, never a guess. */
function parseWalkRows(chunks: readonly string[]): NodeRow[] {
  const out: NodeRow[] = [];
  for (const chunk of chunks) {
    const records = chunk.split(RS);
    const stackId = JSON.parse(records[0]!) as unknown;
    if (typeof stackId !== 'string') throw new Error('walk chunk without its stackId');
    for (let i = 1; i < records.length; i++) {
      const f = records[i]!.split(US);
      if (f.length !== 6) throw new Error(`walk row with ${f.length} fields`);
      const [cid, epoch, pinned, writeSeq, links, payload] = f as [string, string, string, string, string, string];
      out.push({
        cid,
        stackId,
        epoch: Number(epoch),
        links: links === '' ? [] : links.split(' '),
        pinned: pinned === 'true',
        writeSeq: BigInt(writeSeq),
        payload: payload === '' ? null : payload,
      });
    }
  }
  return out;
}

/** The breadth-first walk over fetched index rows; `readable` are the nodes whose payloads to load. */
function bfs(found: NodeRow[], root: string, depth: number, readerEpoch: number): { out: WalkResult; readable: NodeRow[] } {
  const out: WalkResult = { nodes: [], gated: [], missing: [], levels: 0 };
  const byCid = new Map(found.map((r) => [r.cid, r]));
  const seen = new Set<string>([root]);
  let level = [root];
  const readable: NodeRow[] = [];
  while (level.length && out.levels < depth) {
    out.levels++;
    const rows: NodeRow[] = [];
    for (const c of level) {
      const r = byCid.get(c);
      if (r) rows.push(r);
      else out.missing.push(c);
    }
    rows.sort((a, b) => b.epoch - a.epoch || (b.writeSeq > a.writeSeq ? 1 : b.writeSeq < a.writeSeq ? -1 : 0));
    const next: string[] = [];
    for (const r of rows) {
      if (isReadable(r, readerEpoch)) readable.push(r);
      else out.gated.push(r.cid);
      for (const l of r.links) if (!seen.has(l)) seen.add(l), next.push(l);
    }
    level = next;
  }
  return { out, readable };
}

/**
 * Breadth-first walk from root, at most `depth` levels (the root is level 1), newest first within a
 * level. Gated nodes are reported (not returned) but their links are still followed: links are
 * metadata, only payloads are gated. Unknown CIDs and lost payloads are `missing`.
 * Cost: one index query (the stored chain; the recursive query over the links when the chain
 * does not cover the walk) and one batched payload read, whatever the depth.
 */
export async function walkDag(db: Database, objects: ObjectStore, root: string, depth: number, readerEpoch: number): Promise<WalkResult> {
  if (!parseCid(root)) return bfs([], root, depth, readerEpoch).out;
  let walk = bfs(await walkRows(db, root, depth, 'chain'), root, depth, readerEpoch);
  if (walk.out.missing.length) walk = bfs(await walkRows(db, root, depth, 'links'), root, depth, readerEpoch);
  const { out, readable } = walk;
  // The rows' own payloads; the object store only for rows without one.
  const stored = readable.filter((r) => r.payload === null);
  const fromObjects = stored.length
    ? await loadPayloads(
        objects,
        stored.map((r) => r.cid),
      )
    : [];
  const loaded = new Map(stored.map((r, i) => [r.cid, fromObjects[i] ?? null]));
  for (const r of readable) {
    const payload = r.payload !== null ? rowPayload(r.payload) : loaded.get(r.cid);
    if (payload) out.nodes.push(toDagNode(r, payload));
    else out.missing.push(r.cid);
  }
  return out;
}

export async function dagStats(p: Platform): Promise<{ nodes: number; peers: number; pinned: number }> {
  const [nodes, pinned] = await Promise.all([p.db.prisma.memoryNode.count(), p.db.prisma.memoryNode.count({ where: { pinned: true } })]);
  return { nodes, peers: p.config.hippocampusPeers.length, pinned };
}

/**
 * CIDs written in an epoch, in write order (the ipfsRoot leaves for the Thalamus). One row holding
 * them all rather than a row per node through Prisma: under the perceive load an epoch has
 * thousands of writes, each a row object to build. One string split on spaces (a CID has none:
 * every put checks its form, cog://<sha256 hex>@<epoch>), not an array: the driver's array parser
 * reads a literal character by character, 1.2% of the platform's main thread under the PostgreSQL
 * perceive load (each epoch is read three times: its fold and two late-write rechecks).
 */
export async function dagWritesInEpoch(db: Db | Tx, epoch: number): Promise<string[]> {
  const [row] = await db.$queryRaw<{ cids: string | null }[]>`
    SELECT string_agg(cid, ' ' ORDER BY "writeSeq") AS cids FROM "MemoryNode" WHERE epoch = ${epoch}::int`;
  return row?.cids ? row.cids.split(' ') : [];
}

/**
 * Per stack, the newest `perStack` distinct epochs it has nodes in, as an SQL query of ("stackId",
 * epoch) rows (a read of other contexts composes it): one index range of MemoryWriteEpoch a stack.
 * Its rows come with the nodes (indexNodesPart and putNode, the only writers of MemoryNode, insert
 * them in the same statement) and go with the last node of their epoch (a delete trigger: the
 * prune; migration 20261207141918_memory_write_epochs).
 * It replaced a loose index scan of MemoryNode, a probe an epoch (1.3 ms of a 2.7 ms stack read on
 * PGlite, against 0.5).
 */
export const writeEpochsSql = (stackIds: readonly string[], perStack: number): Sql =>
  sql`SELECT s.id AS "stackId", w.epoch
    FROM (SELECT DISTINCT id FROM unnest(${[...stackIds]}::text[]) AS u(id)) s
    CROSS JOIN LATERAL (SELECT epoch FROM "MemoryWriteEpoch" WHERE "stackId" = s.id ORDER BY epoch DESC LIMIT GREATEST(${perStack}::int, 0)) w`;

/** Per stack, the newest `perStack` distinct epochs it wrote nodes in, newest first; one query. */
export async function writeEpochsOf(db: Db | Tx, stackIds: readonly string[], perStack: number): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>(stackIds.map((id) => [id, []]));
  if (!stackIds.length) return out;
  const rows = await db.$queryRaw<Array<{ stackId: string; epoch: number }>>`${writeEpochsSql(stackIds, perStack)} ORDER BY "stackId", epoch DESC`;
  for (const r of rows) out.get(r.stackId)?.push(r.epoch);
  return out;
}

/**
 * One batch of the unpinned nodes older than `before`, the oldest first, in the order of the partial
 * index "MemoryNode_unpinned_epoch_idx" (pinned nodes, kept forever, are not in it; the ORDER BY
 * makes a scan of the table cost all of it, so the planner keeps to the index), deleted by primary
 * key (an array, so the plan is index probes, not a join over the table). Index first (RETURNING
 * only what was really deleted, so a node pinned meanwhile keeps its payload): a node without
 * payload reads as missing, never as a half-node.
 */
export function pruneBatchQuery(before: number, take: number): Sql {
  return sql`DELETE FROM "MemoryNode" WHERE cid = ANY(ARRAY(
      SELECT cid FROM "MemoryNode" WHERE NOT pinned AND epoch < ${before} ORDER BY epoch LIMIT ${take}))
    AND NOT pinned RETURNING cid, payload IS NULL AS "inObjects"`;
}

/**
 * Forgets unpinned nodes older than the retention window (index row and payload), at most
 * `take` (config pruneBatch) a call: one bounded batch per memory-reconciler pass, a backlog
 * drains over the next passes. `more`: the batch was full.
 */
export async function pruneForgotten(p: Platform, take = p.config.pruneBatch): Promise<{ pruned: number; more: boolean }> {
  const before = p.epochs.current() - p.config.retentionEpochs;
  if (before <= 0) return { pruned: 0, more: false };
  const rows = await p.db.prisma.$queryRaw<{ cid: string; inObjects: boolean }[]>(pruneBatchQuery(before, take));
  for (const r of rows) {
    if (!r.inObjects) continue; // the payload went with its row
    walkCache(p.objects).delete(r.cid);
    await p.objects.delete(payloadKey(parseCid(r.cid)!.hash)).catch(() => {});
  }
  return { pruned: rows.length, more: rows.length === take };
}
