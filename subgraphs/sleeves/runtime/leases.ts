// Sleeve leases (docs/scale.md, "Sleeves across many runtimes"): which runtime runs each alive
// sleeve. Triggers on "Sleeve" keep one "SleeveLease" row per alive sleeve (unheld at spawn, gone at
// decommission); runtimes heartbeat in "SleeveRuntimeBeat". All times are the database's clock, so
// the runtimes' clocks need not agree.
import { sql, type Db, type Sql } from '../../../lib/db/index.ts';

/** An expiry `ms` from the database's now. */
const after = (ms: number) => Math.max(1, Math.round(ms));

/** Upserts this runtime's heartbeat (alive for `ttlMs`) and drops the rows of runtimes long gone. */
export async function beat(db: Db, runtime: string, port: number | null, ttlMs: number): Promise<void> {
  await db.$executeRaw`INSERT INTO "SleeveRuntimeBeat" (id, port, "expiresAt") VALUES (${runtime}, ${port}, now() + ${after(ttlMs)} * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE SET port = EXCLUDED.port, "beatAt" = now(), "expiresAt" = EXCLUDED."expiresAt"`;
  await db.$executeRaw`DELETE FROM "SleeveRuntimeBeat" WHERE "expiresAt" < now() - ${after(10 * ttlMs)} * interval '1 millisecond'`;
}

/** Ends this runtime's heartbeat (a clean stop: the others count one runtime fewer at once). */
export async function endBeat(db: Db, runtime: string): Promise<void> {
  await db.$executeRaw`DELETE FROM "SleeveRuntimeBeat" WHERE id = ${runtime}`;
}

/** The runtimes whose heartbeat has not expired (by id), and the alive sleeves (lease rows). */
export async function counts(db: Db): Promise<{ runtimes: string[]; sleeves: number }> {
  const [r] = await db.$queryRaw<{ runtimes: string[] | null; sleeves: number }[]>`SELECT
    (SELECT array_agg(id ORDER BY id) FROM "SleeveRuntimeBeat" WHERE "expiresAt" > now()) AS runtimes,
    (SELECT count(*)::int FROM "SleeveLease") AS sleeves`;
  return { runtimes: r?.runtimes ?? [], sleeves: r?.sleeves ?? 0 };
}

/**
 * The fair share of runtime `me` among the live `runtimes` (sorted): floor(sleeves / runtimes), one
 * more for the first (sleeves mod runtimes) by id. The shares add up to the sleeves exactly, so
 * every runtime can tell its own without asking the others what they hold. A runtime not (yet)
 * among them counts as one more, last.
 */
export function fairShare(sleeves: number, runtimes: string[], me: string): number {
  const live = runtimes.includes(me) ? runtimes : [...runtimes, me];
  const rank = live.indexOf(me);
  return Math.floor(sleeves / live.length) + (rank < sleeves % live.length ? 1 : 0);
}

/** Renews every lease this runtime holds, expired or not (nobody took it); returns the sleeves it holds. */
export async function renew(db: Db, runtime: string, ttlMs: number): Promise<string[]> {
  const rows = await db.$queryRaw<{ sleeveId: string }[]>`UPDATE "SleeveLease" SET "expiresAt" = now() + ${after(ttlMs)} * interval '1 millisecond'
    WHERE runtime = ${runtime} RETURNING "sleeveId"`;
  return rows.map((r) => r.sleeveId);
}

/**
 * Claims up to `n` unheld or expired leases, skipping rows another runtime is claiming at the same
 * moment (FOR UPDATE SKIP LOCKED): two runtimes never get one sleeve. Unheld rows (expiry 1970)
 * come first, then the longest expired.
 */
export async function claim(db: Db, runtime: string, n: number, ttlMs: number): Promise<string[]> {
  if (n <= 0) return [];
  const rows = await db.$queryRaw<
    { sleeveId: string }[]
  >`UPDATE "SleeveLease" l SET runtime = ${runtime}, "expiresAt" = now() + ${after(ttlMs)} * interval '1 millisecond'
    FROM (SELECT "sleeveId" FROM "SleeveLease" WHERE "expiresAt" <= now() ORDER BY "expiresAt" LIMIT ${Math.floor(n)} FOR UPDATE SKIP LOCKED) c
    WHERE l."sleeveId" = c."sleeveId" RETURNING l."sleeveId"`;
  return rows.map((r) => r.sleeveId);
}

/** Claims one sleeve if its lease is unheld or expired (a spawn event); whether this runtime got it. */
export async function claimOne(db: Db, runtime: string, sleeveId: string, ttlMs: number): Promise<boolean> {
  const n = await db.$executeRaw`UPDATE "SleeveLease" SET runtime = ${runtime}, "expiresAt" = now() + ${after(ttlMs)} * interval '1 millisecond'
    WHERE "sleeveId" = ${sleeveId} AND ("expiresAt" <= now() OR runtime = ${runtime})`;
  return n > 0;
}

/** Hands these leases back (unheld, claimable at once); only the ones this runtime still holds. */
export async function release(db: Db, runtime: string, ids: string[]): Promise<void> {
  if (!ids.length) return;
  await db.$executeRaw`UPDATE "SleeveLease" SET runtime = '', "expiresAt" = to_timestamp(0) WHERE runtime = ${runtime} AND "sleeveId" = ANY(${ids})`;
}

/**
 * The tick's heartbeat write, fenced by the lease: lastTickAt moves only while this runtime's lease
 * on the sleeve is unexpired (a runtime that stalled past its lease cannot tick a sleeve another
 * has taken). Whether it moved.
 */
export async function fencedTick(db: Db, runtime: string, sleeveId: string, at: Date): Promise<boolean> {
  const n = await db.$executeRaw`UPDATE "Sleeve" s SET "lastTickAt" = ${at}
    FROM "SleeveLease" l
    WHERE s.id = ${sleeveId} AND s.alive AND NOT s.frozen AND l."sleeveId" = s.id AND l.runtime = ${runtime} AND l."expiresAt" > now()`;
  return n > 0;
}

/**
 * The same write for a batch of due sleeves in one statement: the rows this runtime holds an
 * unexpired lease on and no other transaction has locked (FOR UPDATE SKIP LOCKED: a perceive or a
 * needlecast step holding one is not waited for, nor locked out of order). Returns the sleeves it
 * moved and those it skipped only because their row was locked (the caller ticks those one by one);
 * the others the lease refused (another runtime holds it, or it lapsed), and ticking them alone
 * would be refused too.
 */
export async function fencedTicks(db: Db, runtime: string, sleeveIds: string[], at: Date): Promise<{ moved: string[]; locked: string[] }> {
  if (!sleeveIds.length) return { moved: [], locked: [] };
  const rows = await db.$queryRaw<{ id: string; moved: boolean }[]>(fencedTicksQuery(runtime, sleeveIds, at));
  return { moved: rows.filter((r) => r.moved).map((r) => r.id), locked: rows.filter((r) => !r.moved).map((r) => r.id) };
}

/**
 * The statement of fencedTicks. Each sleeve's lease is read by its primary key (the LATERAL with
 * OFFSET 0 is not flattened into a join): a runtime's id is new with each incarnation, so until the
 * next ANALYZE the statistics say no lease has it, and the planner, free to choose, scanned every
 * lease the runtime holds (the runtime index) once per sleeve of the batch: 300 x 5,000 rows,
 * seconds a statement (bench/scale.ts found it; the plan test in leases.test.ts keeps it out).
 */
export function fencedTicksQuery(runtime: string, sleeveIds: string[], at: Date): Sql {
  return sql`WITH leased AS (
      SELECT s.id FROM "Sleeve" s
      CROSS JOIN LATERAL (SELECT runtime, "expiresAt" FROM "SleeveLease" WHERE "sleeveId" = s.id OFFSET 0) l
      WHERE s.id = ANY(${sleeveIds}) AND s.alive AND NOT s.frozen AND l.runtime = ${runtime} AND l."expiresAt" > now()
    ), c AS (
      SELECT s.id FROM "Sleeve" s WHERE s.id IN (SELECT id FROM leased) AND s.alive AND NOT s.frozen FOR UPDATE SKIP LOCKED
    ), u AS (
      UPDATE "Sleeve" s SET "lastTickAt" = ${at} FROM c WHERE s.id = c.id RETURNING s.id
    )
    SELECT leased.id, u.id IS NOT NULL AS moved FROM leased LEFT JOIN u ON u.id = leased.id`;
}
