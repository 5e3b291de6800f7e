// Emission in closed form. A stack's emission of epoch e is
//   ROUND(100000 x coeff x max(floor, e^(-decay x max(0, e - 1 - L(e)))))   milli-units per core token,
// L(e) being the last epoch the stack was active in before e (docs/decisions.md). Nothing is
// written per stack per epoch: the claimable amount is the sum over the epochs since the last
// settlement, computed when asked, and settled when the stack's activity changes L (markActive) or
// when it claims. The sum is the sum of the per-epoch rounded amounts (not a rounded geometric
// sum): every term up to the epoch the decay reaches the binding's floor is computed one by one,
// the rest are one constant each, so a sum over n epochs costs O(min(n, ~28)).
//
// Every amount is computed by PostgreSQL with the very expression the per-epoch emitter used, so
// the milli-units agree to the last unit (double arithmetic, EXP and ROUND of the same engine).
//
// The inputs of the formula are the economy's own (EmissionAccrual): the stack's CPV and binding,
// copied when the row is opened at stack creation (neither changes after it), and L itself, which
// the economy owns and markActive moves. The SQL fragments below read them from a row aliased `s`.
import { sql, sqlText, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { jsonValue, numberedSql, runStatement, type ReadPart, type StatementPart } from '../../lib/db/statement.ts';

/** Units of each core token emitted per stack per epoch before scaling (spec: Limits). */
export const EMISSION_PER_EPOCH = 100;
/** Closed runs kept per stack: the issuance list shows the last 100 epochs. */
export const RUN_HISTORY_EPOCHS = 100;
const NEVER = 1_000_000_000;

export const ACCRUAL_TOKENS = [
  ['compute', 'computeCoeff', 'computeMilli'],
  ['memory', 'memoryCoeff', 'memoryMilli'],
  ['sync', 'syncCoeff', 'syncMilli'],
  ['routing', 'routingCoeff', 'routingMilli'],
] as const;

/** The EBC factor of quiet-epoch count `d` (SQL over an "EmissionAccrual" row aliased `s`). */
export const ebcSql = (d: string) => `GREATEST(s."bindingFloor", EXP(-s."bindingDecay" * GREATEST(0, ${d})))`;

/** One epoch's emission in milli-units, `d` quiet epochs before it (the per-epoch emitter's expression). */
export const amountSql = (coeff: string, d: string) => `ROUND(${EMISSION_PER_EPOCH * 1000} * s."${coeff}" * ${ebcSql(d)})::bigint`;

/**
 * The quiet-epoch count from which every term is the same: decay 0 never decays (from 0); with a
 * floor, one past ln(1/floor)/decay (e^(-decay x d) is below the floor from there); without one,
 * where even a coefficient of 2 rounds to 0 milli (100000 x 2 x e^(-decay x d) < 0.5).
 */
export const tailSql = `(CASE WHEN s."bindingDecay" = 0 THEN 0 WHEN s."bindingDecay" < 0 THEN ${NEVER}
  WHEN s."bindingFloor" > 0 THEN LEAST(${NEVER}, GREATEST(0, CEIL(LN(1 / s."bindingFloor") / s."bindingDecay")) + 1)
  ELSE LEAST(${NEVER}, CEIL(LN(400000) / s."bindingDecay") + 1) END)::int`;

/**
 * The emission terms of a row aliased `s` as one key (their float8 bits, hex): the amounts of two
 * stacks with the same key and lastActiveEpoch are the same in every epoch (EmissionCohort).
 */
export const termsKeySql = `encode(float8send(s."computeCoeff") || float8send(s."memoryCoeff") || float8send(s."syncCoeff") || float8send(s."routingCoeff")
  || float8send(s."bindingFloor") || float8send(s."bindingDecay"), 'hex')`;

/** Sum in milli-units of the emission of the epochs whose quiet counts are d0..d1 (empty when d1 < d0). */
export function sumSql(coeff: string, d0: string, d1: string, tail = tailSql): string {
  return `(COALESCE((SELECT SUM(${amountSql(coeff, 'g.d')}) FROM generate_series(${d0}, LEAST(${d1}, ${tail} - 1)) AS g(d)), 0)
    + GREATEST(0, (${d1}) - GREATEST(${d0}, ${tail}) + 1)::bigint * ${amountSql(coeff, tail)})::bigint`;
}

/**
 * Per stack of `ids`: its accrual row as `s` reads it (id, since, settled). A stack has a row from
 * its creation (openAccrual; the migration emission_inputs_owned gave one to every older stack); a
 * stack row inserted around createStack has none and accrues nothing.
 */
export const accrualRowsSql = (ids: string) => `SELECT a.*, a."stackId" AS id, a."sinceEpoch" AS since, a."settledEpoch" AS settled
  FROM "EmissionAccrual" a WHERE a."stackId" = ANY(${ids})`;

export interface MilliAmounts {
  compute: bigint;
  memory: bigint;
  sync: bigint;
  routing: bigint;
}

/** What each stack accrued and has not claimed, as of `epoch` (settled part + the open sum). */
export async function accruedOf(db: Db | Tx, stackIds: string[], epoch: number): Promise<Map<string, MilliAmounts>> {
  const out = new Map<string, MilliAmounts>();
  if (!stackIds.length) return out;
  // Epochs settled+1..epoch, each with d = e - 1 - lastActiveEpoch.
  const cols = ACCRUAL_TOKENS.map(
    ([t, coeff, milli]) => `(s."${milli}" + ${sumSql(coeff, 's.settled - s."lastActiveEpoch"', `$2::int - 1 - s."lastActiveEpoch"`)})::text AS ${t}`,
  ).join(', ');
  const rows = await db.$queryRawUnsafe<Array<{ id: string } & Record<string, string>>>(
    `SELECT s.id, ${cols} FROM (${accrualRowsSql('$1::text[]')}) s`,
    stackIds,
    epoch,
  );
  for (const r of rows) out.set(r.id, { compute: BigInt(r.compute), memory: BigInt(r.memory), sync: BigInt(r.sync), routing: BigInt(r.routing) });
  return out;
}

/** What a stack is created with that the emission formula reads: its CPV and binding (fixed from then on). */
export interface AccrualTerms {
  cpv: { syncCoeff: number; memoryCoeff: number; computeCoeff: number; residueCoeff: number; routingCoeff: number };
  binding: { floor: number; decayRate: number };
}

/**
 * A new stack's accrual row, with the economy's copy of its terms: it accrues from the epoch after
 * its creation (creation is activity, so `epoch` is its first lastActiveEpoch).
 */
export async function openAccrual(tx: Tx, stackId: string, epoch: number, terms: AccrualTerms): Promise<void> {
  const { cpv, binding } = terms;
  await runStatement(tx, [
    openAccrualPart(
      sql`SELECT ${stackId}::text AS "stackId", ${cpv.syncCoeff}::float8 AS "syncCoeff", ${cpv.memoryCoeff}::float8 AS "memoryCoeff",
        ${cpv.computeCoeff}::float8 AS "computeCoeff", ${cpv.residueCoeff}::float8 AS "residueCoeff", ${cpv.routingCoeff}::float8 AS "routingCoeff",
        ${binding.floor}::float8 AS "bindingFloor", ${binding.decayRate}::float8 AS "bindingDecay"`,
      epoch,
    ),
  ]);
}

const TAIL = sqlText(tailSql);

/**
 * openAccrual as part of a composed statement (lib/db/statement.ts), for the statement that creates
 * the stacks: one accrual row for each row of `terms`, a SELECT with the columns "stackId" and the
 * terms' ("syncCoeff" … "routingCoeff", "bindingFloor", "bindingDecay"), as openAccrual writes it.
 */
export function openAccrualPart(terms: Sql, epoch: number, name = 'accrual_new'): StatementPart {
  return {
    ctes: [
      {
        name,
        body: sql`INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "bindingFloor", "bindingDecay",
            "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch")
          SELECT s."stackId", s."syncCoeff", s."memoryCoeff", s."computeCoeff", s."residueCoeff", s."routingCoeff", s."bindingFloor", s."bindingDecay",
            ${epoch}::int, ${epoch}::int + 1, ${epoch}::int, ${epoch}::int + 1 + ${TAIL}
          FROM (${terms}) s
          ON CONFLICT ("stackId") DO NOTHING`,
      },
    ],
  };
}

/** The lastActiveEpoch of a stack without an accrual row (0: the default the stacks' own column had before). */
export const NEVER_ACTIVE = 0;

/** Each stack's lastActiveEpoch as one read of a read statement (lib/db/statement.ts); a stack without an accrual row is not in the map. */
export function lastActiveEpochsRead(stackIds: readonly string[]): ReadPart<Map<string, number>> {
  return {
    expr: sql`SELECT json_agg(json_build_array("stackId", "lastActiveEpoch")) FROM "EmissionAccrual" WHERE "stackId" = ANY(${[...stackIds]}::text[])`,
    parse: (v) => new Map(((jsonValue(v) as Array<[string, number]> | null) ?? []).map(([id, l]) => [id, Number(l)])),
  };
}

/** Each stack's lastActiveEpoch (the economy owns it); a stack without an accrual row is not in the map. */
export async function lastActiveEpochs(db: Db | Tx, stackIds: readonly string[]): Promise<Map<string, number>> {
  if (!stackIds.length) return new Map();
  const rows = await db.$queryRaw<{ id: string; l: number }[]>`
    SELECT "stackId" AS id, "lastActiveEpoch" AS l FROM "EmissionAccrual" WHERE "stackId" = ANY(${[...stackIds]})`;
  return new Map(rows.map((r) => [r.id, Number(r.l)]));
}

const SETTLE = ACCRUAL_TOKENS.map(
  ([, coeff, milli]) => `"${milli}" = s."${milli}" + ${sumSql(coeff, 's."settledEpoch" - s."lastActiveEpoch"', '$2::int - 1 - s."lastActiveEpoch"')}`,
).join(', ');

/**
 * The stack spent or wrote in `epoch`, which becomes its lastActiveEpoch (part of a statement, or
 * markActive's own). Keyed on `"lastActiveEpoch" < epoch`, it locks the accrual row, settles the
 * epochs up to `epoch` (whose emission was made as each began, with the old value) into it, records
 * them as a closed run (and drops runs past the history kept), and moves lastActiveEpoch, so later
 * epochs are computed from the new value. `acc_s` is the row as locked (a concurrent settlement or
 * claim is waited for and re-read: the READ COMMITTED re-check of FOR UPDATE), and every value
 * written is computed from it. A no-op, touching no row, when the stack was already active in
 * `epoch` or later (one index probe), or has no accrual row. The caller holds the stack row lock
 * (the stacks context's, which serialises a stack's writers: a write's part comes after its head
 * move); a claim and a settlement serialise on the accrual row. `stackIds`: one stack, or several
 * marked active in the same epoch.
 */
export function markActivePart(stackIds: string | readonly string[], epoch: number): StatementPart {
  // Several stacks (a group commit's, each with its stack row locked by the caller) as one set:
  // every CTE below is keyed on acc_s's rows, locked in stack id order.
  const p = [typeof stackIds === 'string' ? [stackIds] : [...stackIds].sort(), epoch];
  return {
    ctes: [
      {
        name: 'acc_s',
        body: numberedSql(`SELECT * FROM "EmissionAccrual" WHERE "stackId" = ANY($1::text[]) AND "lastActiveEpoch" < $2::int ORDER BY "stackId" FOR UPDATE`, p),
      },
      {
        name: 'acc_run',
        body: numberedSql(
          `INSERT INTO "EmissionRun" ("stackId", "fromEpoch", "toEpoch", "lastActiveEpoch")
           SELECT s."stackId", GREATEST(s."lastActiveEpoch" + 1, s."sinceEpoch"), $2::int, s."lastActiveEpoch" FROM acc_s s
           WHERE GREATEST(s."lastActiveEpoch" + 1, s."sinceEpoch") <= $2::int
           ON CONFLICT ("stackId", "toEpoch") DO NOTHING`,
          p,
        ),
      },
      {
        name: 'acc_pruned',
        body: numberedSql(`DELETE FROM "EmissionRun" r USING acc_s s WHERE r."stackId" = s."stackId" AND r."toEpoch" < $2::int - ${RUN_HISTORY_EPOCHS}`, p),
      },
      {
        name: 'acc_mark',
        body: numberedSql(
          `UPDATE "EmissionAccrual" a SET ${SETTLE}, "settledEpoch" = GREATEST(s."settledEpoch", $2::int),
             "floorEpoch" = $2::int + 1 + ${tailSql}, "lastActiveEpoch" = $2::int
           FROM acc_s s WHERE a."stackId" = s."stackId" RETURNING 1`,
          p,
        ),
      },
    ],
  };
}

/**
 * A check that markActivePart(stackId, epoch) would be a no-op (no accrual row of the stack before
 * `epoch`: one index probe), for a statement that skips the mark (sleeves' spendForRead): planning
 * markActivePart's CTEs costs more than the rest of a read's spend; `fail` when the mark is due,
 * and the caller runs the statement again with markActivePart.
 */
export function activeInPart(stackId: string, epoch: number, fail: () => Error): StatementPart {
  return {
    checks: [
      {
        holds: sql`NOT EXISTS (SELECT 1 FROM "EmissionAccrual" a WHERE a."stackId" = ${stackId} AND a."lastActiveEpoch" < ${epoch}::int)`,
        fail,
      },
    ],
  };
}

/** markActivePart as its own statement, in the caller's transaction. True when the stack became active in `epoch`. */
export async function markActive(tx: Tx, stackId: string, epoch: number): Promise<boolean> {
  const part = markActivePart(stackId, epoch);
  const out = await runStatement(tx, [part, { outputs: [{ name: 'moved', expr: sql`(SELECT count(*) FROM acc_mark) > 0` }] }]);
  return out.moved === true;
}

/**
 * Settles a stack's accrual through `epoch` and empties it: returns what it held (milli), which the
 * caller posts from the treasury. Serialised by the accrual row lock (a second claim gets zeros).
 */
export async function takeAccrued(tx: Tx, stackId: string, epoch: number): Promise<MilliAmounts> {
  // Locked first, read after: the sums below see the stack as the last activity left it.
  const locked = await tx.$queryRaw<unknown[]>`SELECT 1 FROM "EmissionAccrual" WHERE "stackId" = ${stackId} FOR UPDATE`;
  if (!locked.length) return { compute: 0n, memory: 0n, sync: 0n, routing: 0n };
  const got = (await accruedOf(tx, [stackId], epoch)).get(stackId) ?? { compute: 0n, memory: 0n, sync: 0n, routing: 0n };
  await tx.$executeRaw`UPDATE "EmissionAccrual" SET "computeMilli" = 0, "memoryMilli" = 0, "syncMilli" = 0, "routingMilli" = 0,
    "settledEpoch" = GREATEST("settledEpoch", ${epoch}) WHERE "stackId" = ${stackId}`;
  return got;
}

export interface ComputedEmission {
  stackId: string;
  epoch: number;
  milli: MilliAmounts;
  ebcFactor: number;
  cpv: { syncCoeff: number; memoryCoeff: number; computeCoeff: number; residueCoeff: number; routingCoeff: number };
  createdAt: Date;
}

/**
 * The emission events of stacks for epochs `lo(stack)`..`epoch` (at most `limit` newest each), computed
 * from the runs: epoch e of a closed run used its lastActiveEpoch, later ones the accrual row's current one.
 * `only` restricts to one epoch (an Emission entity by id). Epochs before a stack's since are not
 * here (the per-epoch rows of before, if any, are).
 */
export async function computedEmissions(db: Db | Tx, stackIds: string[], epoch: number, limit: number, only?: number): Promise<ComputedEmission[]> {
  if (!stackIds.length || limit <= 0) return [];
  const amounts = ACCRUAL_TOKENS.map(([t, coeff]) => `${amountSql(coeff, 'e.d')}::text AS ${t}`).join(', ');
  const rows = await db.$queryRawUnsafe<Array<Record<string, unknown>>>(
    `SELECT s.id, e.epoch, ${amounts}, ${ebcSql('e.d')} AS ebc, s."syncCoeff", s."memoryCoeff", s."computeCoeff", s."residueCoeff", s."routingCoeff",
       COALESCE(ee."startedAt", now()) AS "createdAt"
     FROM (${accrualRowsSql('$1::text[]')}) s
     CROSS JOIN LATERAL (
       SELECT g.e AS epoch, g.e - 1 - COALESCE((SELECT r."lastActiveEpoch" FROM "EmissionRun" r
         WHERE r."stackId" = s.id AND r."toEpoch" >= g.e AND r."fromEpoch" <= g.e ORDER BY r."toEpoch" LIMIT 1), s."lastActiveEpoch") AS d
       FROM generate_series(GREATEST(s.since, $2::int - $3::int + 1, COALESCE($4::int, s.since)), LEAST($2::int, COALESCE($4::int, $2::int))) AS g(e)
     ) e
     LEFT JOIN "EmissionEpoch" ee ON ee.epoch = e.epoch
     ORDER BY e.epoch DESC`,
    stackIds,
    epoch,
    limit,
    only ?? null,
  );
  return rows.map((r) => ({
    stackId: r.id as string,
    epoch: Number(r.epoch),
    milli: { compute: BigInt(r.compute as string), memory: BigInt(r.memory as string), sync: BigInt(r.sync as string), routing: BigInt(r.routing as string) },
    ebcFactor: Number(r.ebc),
    cpv: {
      syncCoeff: Number(r.syncCoeff),
      memoryCoeff: Number(r.memoryCoeff),
      computeCoeff: Number(r.computeCoeff),
      residueCoeff: Number(r.residueCoeff),
      routingCoeff: Number(r.routingCoeff),
    },
    createdAt: new Date(r.createdAt as string | Date),
  }));
}
