// Sleeve leases (docs/scale.md, "Sleeves across many runtimes"): which runtime runs each alive
// sleeve. Triggers on "Sleeve" keep one "SleeveLease" row per alive sleeve (unheld at spawn, gone at
// decommission). A lease names its holder and the holder's generation; it has no expiry of its own.
// Each runtime has one "SleeveRuntimeBeat" row, renewed every half lease: a lease is held while its
// holder's row carries the lease's generation and has not expired. So renewal writes one row per
// runtime, whatever it holds. A runtime whose beat lapsed is fenced by the next runtime that sees
// it: its generation moves on (from a sequence, never reused), which frees its leases for others
// and refuses its ticks and claims; it learns so at its next beat. All times are the database's
// clock, so the runtimes' clocks need not agree.
import { sql, type Database, type Db, type Sql } from '../../../lib/db/index.ts';
import { jsonValue, queryPrepared } from '../../../lib/db/statement.ts';

/** A runtime as a lease names it: its id and the generation it registered (or was last fenced) with. */
export interface Holder {
  runtime: string;
  gen: number;
}

/** An expiry `ms` from the database's now. */
const after = (ms: number) => Math.max(1, Math.round(ms));
const NEXT_GEN = sql`nextval('"SleeveRuntimeBeat_gen_seq"')::int`;

/**
 * Registers runtime `runtime` with a new generation (a start, or after it was fenced): leases of its
 * earlier generations become free, its own to take back first (a restart with the same id need not
 * wait for anything to expire). Returns the holder.
 */
export async function register(db: Db, runtime: string, port: number | null, ttlMs: number, weight = 1): Promise<Holder> {
  const [r] = await db.$queryRaw<{ gen: number }[]>`INSERT INTO "SleeveRuntimeBeat" (id, gen, held, port, weight, "expiresAt")
    VALUES (${runtime}, ${NEXT_GEN}, 0, ${port}, ${weight}, now() + ${after(ttlMs)} * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE SET gen = EXCLUDED.gen, held = 0, port = EXCLUDED.port, weight = EXCLUDED.weight, "startedAt" = now(), "beatAt" = now(), "expiresAt" = EXCLUDED."expiresAt"
    RETURNING gen`;
  return { runtime, gen: Number(r!.gen) };
}

/**
 * Renews this runtime's beat, and with it every lease it holds, and takes the leases that went with
 * their sleeve since (SleeveLeaseEnd) off its count: `ended`. 'live' when renewed; 'fenced' when its
 * generation moved on because the beat lapsed (its leases are free now); 'superseded' when another
 * live process registered under the same id since.
 */
export async function renewBeat(db: Db, h: Holder, port: number | null, ttlMs: number): Promise<{ state: 'live' | 'fenced' | 'superseded'; ended: string[] }> {
  const [r] = await db.$queryRaw<{ renewed: number; live: boolean | null; ended: string[] | null }[]>`WITH e AS (
      DELETE FROM "SleeveLeaseEnd" WHERE runtime = ${h.runtime} RETURNING "sleeveId", gen
    ), u AS (
      UPDATE "SleeveRuntimeBeat" SET "expiresAt" = now() + ${after(ttlMs)} * interval '1 millisecond', "beatAt" = now(), port = ${port},
        held = GREATEST(0, held - (SELECT count(*) FROM e WHERE e.gen = ${h.gen}))
      WHERE id = ${h.runtime} AND gen = ${h.gen} RETURNING 1
    ) SELECT (SELECT count(*) FROM u)::int AS renewed, (SELECT "expiresAt" > now() FROM "SleeveRuntimeBeat" WHERE id = ${h.runtime}) AS live,
      (SELECT array_agg("sleeveId") FROM e WHERE e.gen = ${h.gen}) AS ended`;
  const state = r!.renewed > 0 ? 'live' : r!.live ? 'superseded' : 'fenced';
  return { state, ended: r!.ended ?? [] };
}

/**
 * Fences the runtimes whose beat lapsed (a new generation, nothing held, expiry 1970 marking them
 * fenced), so their leases are free; drops the rows of fenced runtimes no lease names any more.
 * O(runtimes): it reads their rows, never the leases but by one index probe per fenced runtime.
 */
export async function fenceLapsed(db: Db, me: string): Promise<{ fenced: number; dropped: number }> {
  const [r] = await db.$queryRaw<{ fenced: number; dropped: number }[]>`WITH lapsed AS (
      SELECT id FROM "SleeveRuntimeBeat" WHERE "expiresAt" <= now() AND "expiresAt" > to_timestamp(0) AND id <> ${me} ORDER BY id FOR UPDATE SKIP LOCKED
    ), f AS (
      UPDATE "SleeveRuntimeBeat" b SET gen = ${NEXT_GEN}, held = 0, "expiresAt" = to_timestamp(0) FROM lapsed WHERE b.id = lapsed.id RETURNING b.id
    ), d AS (
      DELETE FROM "SleeveRuntimeBeat" b WHERE b."expiresAt" = to_timestamp(0) AND NOT EXISTS (SELECT 1 FROM "SleeveLease" l WHERE l.runtime = b.id) RETURNING b.id
    ), de AS (
      DELETE FROM "SleeveLeaseEnd" e USING d WHERE e.runtime = d.id
    ) SELECT (SELECT count(*) FROM f)::int AS fenced, (SELECT count(*) FROM d)::int AS dropped`;
  return r!;
}

/** Free leases of one kind: those naming `runtime` below generation `below` ('' below 1: unheld). */
export interface FreeLeases {
  runtime: string;
  below: number;
  n: number;
}

/**
 * One snapshot of the shares: the live runtimes (by id) and their weights, the alive sleeves (each runtime's `held`,
 * less the leases that ended since its last round, plus the free ones) and where the free leases
 * are. O(runtimes + free leases + ended ones): no lease a live runtime holds is read.
 */
export async function survey(db: Db): Promise<{ runtimes: string[]; weights: number[]; sleeves: number; free: FreeLeases[] }> {
  const [r] = await db.$queryRaw<{ runtimes: string[] | null; weights: number[] | null; held: number; free: unknown }[]>`WITH b AS (
      SELECT id, gen, held, weight, "expiresAt" > now() AS live FROM "SleeveRuntimeBeat"
    ), h AS (
      SELECT ''::text AS id, 1 AS below UNION ALL SELECT id, gen FROM b
    ) SELECT
      (SELECT array_agg(id ORDER BY id) FROM b WHERE live) AS runtimes,
      (SELECT array_agg(weight ORDER BY id) FROM b WHERE live) AS weights,
      ((SELECT COALESCE(sum(held), 0) FROM b) - (SELECT count(*) FROM "SleeveLeaseEnd" e JOIN b ON b.id = e.runtime AND b.gen = e.gen))::int AS held,
      (SELECT COALESCE(json_agg(json_build_object('runtime', h.id, 'below', h.below, 'n', x.n)), '[]'::json) FROM h
        CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM "SleeveLease" l WHERE l.runtime = h.id AND l.gen < h.below) x WHERE x.n > 0) AS free`;
  const free = jsonValue(r!.free) as FreeLeases[];
  return { runtimes: r!.runtimes ?? [], weights: (r!.weights ?? []).map(Number), sleeves: Number(r!.held) + free.reduce((s, f) => s + f.n, 0), free };
}

/**
 * The fair share of runtime `me` among the live `runtimes` (sorted by id) with their `weights`
 * (aligned; none given: 1 each): each gets floor(sleeves x weight / total weight), and the sleeves
 * left over go one each to the largest remainders, then by id. The shares add up to the sleeves
 * exactly, so every runtime can tell its own without asking the others what they hold. A runtime
 * not (yet) among them counts with `myWeight`, last. Weight 0 is a standby: it gets nothing while
 * any live runtime has a weight, and an equal share when none has.
 */
export function fairShare(sleeves: number, runtimes: string[], me: string, weights?: readonly number[], myWeight = 1): number {
  const ids = runtimes.includes(me) ? runtimes : [...runtimes, me];
  const mine = ids.indexOf(me);
  let w = ids.map((_, i) => Math.max(0, i === mine ? myWeight : (weights?.[i] ?? 1)));
  if (w.every((x) => x === 0)) w = w.map(() => 1);
  const total = w.reduce((s, x) => s + x, 0);
  const base = w.map((x) => Math.floor((sleeves * x) / total));
  const rem = w.map((x) => (sleeves * x) % total);
  const left = sleeves - base.reduce((s, x) => s + x, 0);
  // Ties in remainder go by position, which is id order (the live runtimes come sorted).
  const order = ids.map((_, i) => i).sort((a, b) => rem[b]! - rem[a]! || a - b);
  return base[mine]! + (order.indexOf(mine) < left ? 1 : 0);
}

/** The row lock that makes a claim hold only while the claimer is live at its generation (a fence waits for it, or refuses it). */
const claimerLive = (h: Holder) => sql`SELECT 1 FROM "SleeveRuntimeBeat" WHERE id = ${h.runtime} AND gen = ${h.gen} AND "expiresAt" > now() FOR UPDATE`;

/**
 * Claims up to `n` free leases from `from` (in that order: the caller puts its own earlier
 * generation first), skipping rows another runtime is claiming at the same moment (FOR UPDATE SKIP
 * LOCKED): two runtimes never get one sleeve. Its `held` moves in the same statement.
 */
export async function claim(db: Db, h: Holder, n: number, from: readonly Omit<FreeLeases, 'n'>[]): Promise<string[]> {
  if (n <= 0 || !from.length) return [];
  const k = Math.floor(n);
  const rows = await db.$queryRaw<{ sleeveId: string }[]>`WITH mine AS (${claimerLive(h)}),
    src AS (SELECT * FROM unnest(${from.map((f) => f.runtime)}::text[], ${from.map((f) => f.below)}::int[]) WITH ORDINALITY AS t(runtime, below, ord)),
    c AS (
      SELECT x."sleeveId" FROM src CROSS JOIN LATERAL (
        SELECT "sleeveId" FROM "SleeveLease" l WHERE l.runtime = src.runtime AND l.gen < src.below LIMIT ${k} FOR UPDATE SKIP LOCKED
      ) x WHERE EXISTS (SELECT 1 FROM mine) LIMIT ${k}
    ), u AS (
      UPDATE "SleeveLease" l SET runtime = ${h.runtime}, gen = ${h.gen} FROM c WHERE l."sleeveId" = c."sleeveId" RETURNING l."sleeveId"
    ), b AS (
      UPDATE "SleeveRuntimeBeat" SET held = held + (SELECT count(*) FROM u) WHERE id = ${h.runtime} AND gen = ${h.gen} AND EXISTS (SELECT 1 FROM u)
    ) SELECT "sleeveId" FROM u`;
  return rows.map((r) => r.sleeveId);
}

/** Claims one sleeve if nobody holds its lease yet (a spawn event); whether this runtime got it. */
export async function claimOne(db: Db, h: Holder, sleeveId: string): Promise<boolean> {
  const [r] = await db.$queryRaw<{ n: number }[]>`WITH mine AS (${claimerLive(h)}),
    u AS (
      UPDATE "SleeveLease" SET runtime = ${h.runtime}, gen = ${h.gen} WHERE "sleeveId" = ${sleeveId} AND runtime = '' AND EXISTS (SELECT 1 FROM mine) RETURNING 1
    ), b AS (
      UPDATE "SleeveRuntimeBeat" SET held = held + 1 WHERE id = ${h.runtime} AND gen = ${h.gen} AND EXISTS (SELECT 1 FROM u)
    ) SELECT count(*)::int AS n FROM u`;
  return r!.n > 0;
}

/** Hands these leases back (unheld, claimable at once); only the ones this runtime still holds. */
export async function release(db: Db, h: Holder, ids: string[]): Promise<void> {
  if (!ids.length) return;
  await db.$executeRaw`WITH r AS (
      UPDATE "SleeveLease" SET runtime = '', gen = 0 WHERE runtime = ${h.runtime} AND gen = ${h.gen} AND "sleeveId" = ANY(${ids}) RETURNING 1
    ) UPDATE "SleeveRuntimeBeat" SET held = GREATEST(0, held - (SELECT count(*) FROM r)) WHERE id = ${h.runtime} AND gen = ${h.gen} AND EXISTS (SELECT 1 FROM r)`;
}

/**
 * The leases this runtime holds, read from the leases (O(held)) and its `held` set from them: only
 * after a round failed midway, when its own account of them may be off.
 */
export async function heldBy(db: Db, h: Holder): Promise<string[]> {
  const rows = await db.$queryRaw<{ sleeveId: string }[]>`WITH mine AS (
      SELECT "sleeveId" FROM "SleeveLease" WHERE runtime = ${h.runtime} AND gen = ${h.gen}
    ), b AS (
      UPDATE "SleeveRuntimeBeat" SET held = (SELECT count(*) FROM mine) WHERE id = ${h.runtime} AND gen = ${h.gen}
    ) SELECT "sleeveId" FROM mine`;
  return rows.map((r) => r.sleeveId);
}

/**
 * Ends this runtime's beat (a clean stop, after handing its leases back): the row goes when no
 * lease names it; otherwise it is fenced, so what it still held is free at once.
 */
export async function endBeat(db: Db, h: Holder): Promise<void> {
  const gone = await db.$executeRaw`DELETE FROM "SleeveRuntimeBeat" WHERE id = ${h.runtime} AND gen = ${h.gen}
    AND NOT EXISTS (SELECT 1 FROM "SleeveLease" WHERE runtime = ${h.runtime})`;
  if (!gone)
    await db.$executeRaw`UPDATE "SleeveRuntimeBeat" SET gen = ${NEXT_GEN}, held = 0, "expiresAt" = to_timestamp(0) WHERE id = ${h.runtime} AND gen = ${h.gen}`;
}

/** This holder's beat is live at its generation: the fence of every tick. */
const holderLive = (h: Holder) => sql`EXISTS (SELECT 1 FROM "SleeveRuntimeBeat" b WHERE b.id = ${h.runtime} AND b.gen = ${h.gen} AND b."expiresAt" > now())`;

/**
 * The fence of a tick: whether this runtime may tick these sleeves now. A sleeve passes while this
 * runtime holds its lease at its generation, its beat is live (a runtime that stalled past its beat,
 * or was fenced, cannot tick a sleeve another may have taken) and the sleeve is alive and unfrozen.
 * A read, one statement per batch: a tick writes no row (docs/decisions.md, "A tick writes
 * nothing"). No row is locked either, so a tick never waits for a perceive holding the Sleeve row or
 * a claim moving a lease; a lease moves only from a runtime whose beat lapsed, which this check
 * refuses already. Returns the sleeves that passed.
 * Through the driver, as a prepared statement: it runs about 30 times a second with 128 sleeves
 * ticking, and Prisma's engine spent 0.3 ms of the platform's thread on each beyond the query.
 */
export async function fencedTicks(db: Database, h: Holder, sleeveIds: string[]): Promise<string[]> {
  if (!sleeveIds.length) return [];
  return (await queryPrepared<{ id: string }>(db, fencedTicksQuery(h, sleeveIds))).map((r) => r.id);
}

/** fencedTicks for one sleeve. */
export async function fencedTick(db: Database, h: Holder, sleeveId: string): Promise<boolean> {
  return (await fencedTicks(db, h, [sleeveId])).length > 0;
}

/**
 * The statement of fencedTicks. Each sleeve's lease is read by its primary key (the LATERAL with
 * OFFSET 0 is not flattened into a join): a runtime's generation is new with each registration, so
 * until the next ANALYZE the statistics say no lease has it, and the planner, free to choose, scanned
 * every lease the runtime holds (the runtime index) once per sleeve of the batch: 300 x 5,000 rows,
 * seconds a statement (bench/scale.ts found it; the plan test in leases.test.ts keeps it out).
 */
export function fencedTicksQuery(h: Holder, sleeveIds: string[]): Sql {
  return sql`SELECT s.id FROM "Sleeve" s
    CROSS JOIN LATERAL (SELECT runtime, gen FROM "SleeveLease" WHERE "sleeveId" = s.id OFFSET 0) l
    WHERE s.id = ANY(${sleeveIds}::text[]) AND s.alive AND NOT s.frozen AND l.runtime = ${h.runtime} AND l.gen = ${h.gen} AND ${holderLive(h)}`;
}
