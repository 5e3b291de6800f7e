// The Treasury: per-epoch emission of the four core tokens per stack, scaled by the CPV and
// decayed by the stack's EBC binding, accrued as claimable; a claim moves it into the stack pool.
// Emission accrues in closed form (accrual.ts): nothing is written per stack per epoch. The
// emitter pass writes one EmissionEpoch row (the epoch's totals for the on-chain record, kept as
// running sums and cohorts so it costs what changed) and the events of the stacks someone
// subscribed to.
import { sql, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { composeStatement, jsonValue, numberedSql, runStatement, type StatementPart } from '../../lib/db/statement.ts';
import { recordEvent } from '../../lib/events.ts';
import type { Platform } from '../../lib/platform.ts';
import { computedIntentsPart, enqueueChainTx } from '../chains/index.ts';
import { holders } from './holders.ts';
import {
  CORE_TOKENS,
  SYSTEM,
  TOKENS,
  balancesOf,
  claimableAccount,
  fromMilli,
  poolAccount,
  post,
  sleeveAccount,
  transfer,
  type Token,
  type TokenAmounts,
} from './ledger.ts';
import {
  ACCRUAL_TOKENS,
  EMISSION_PER_EPOCH,
  accruedOf,
  amountSql,
  computedEmissions,
  lastActiveEpochs,
  NEVER_ACTIVE,
  tailSql,
  takeAccrued,
  termsKeySql,
  type ComputedEmission,
  type MilliAmounts,
} from './accrual.ts';
import { watchedOf, watchedStacksPart } from './watch.ts';

export { EMISSION_PER_EPOCH };

export type CoreAmounts = Record<(typeof CORE_TOKENS)[number], number>;
export interface Cpv {
  syncCoeff: number;
  memoryCoeff: number;
  computeCoeff: number;
  residueCoeff: number;
  routingCoeff: number;
}

export interface EmissionEvent {
  id: string;
  stackId: string;
  epoch: number;
  amounts: CoreAmounts;
  cpv: Cpv;
  ebcFactor: number;
  createdAt: string;
}

export const COEFF: Record<Token, keyof Cpv> = {
  compute: 'computeCoeff',
  memory: 'memoryCoeff',
  sync: 'syncCoeff',
  routing: 'routingCoeff',
  residue: 'residueCoeff',
};

/** EBC decay: max(floor, e^(-decayRate x delta epoch)); delta never negative. */
export function ebcFactor(binding: { floor: number; decayRate: number }, deltaEpoch: number): number {
  return Math.max(binding.floor, Math.exp(-binding.decayRate * Math.max(0, deltaEpoch)));
}

export const cpvOf = (s: Cpv): Cpv => ({
  syncCoeff: s.syncCoeff,
  memoryCoeff: s.memoryCoeff,
  computeCoeff: s.computeCoeff,
  residueCoeff: s.residueCoeff,
  routingCoeff: s.routingCoeff,
});

const round3 = (x: number) => Math.round(x * 1000) / 1000;
const FLOOR_COLS = { compute: 'floorCompute', memory: 'floorMemory', sync: 'floorSync', routing: 'floorRouting' } as const;

/** Most new stacks one tally statement takes (the first epoch over a bulk of fixtures takes them all, in turns). */
const TALLY_BATCH = 10_000;

/**
 * The stacks that begin accruing by `epoch` and are not tallied yet (at most `limit`), locked: their
 * activity waits for the emitter, so the tally sees each at its latest lastActiveEpoch and runs.
 */
export function untalliedQuery(epoch: number, limit: number): Sql {
  return numberedSql(`SELECT "stackId" FROM "EmissionAccrual" WHERE NOT tallied AND "sinceEpoch" <= $1::int ORDER BY "stackId" LIMIT $2::int FOR UPDATE`, [
    epoch,
    limit,
  ]);
}

/**
 * Adds the rows of `from` (aliased s: the terms, `l` a lastActiveEpoch, `n` stacks) to their
 * cohorts, but not to those at their floor by epoch $1 (they add nothing from then on, and the
 * epoch statement drops them).
 */
const addToCohorts = (
  from: string,
) => `INSERT INTO "EmissionCohort" (terms, "lastActiveEpoch", "computeCoeff", "memoryCoeff", "syncCoeff", "routingCoeff", "bindingFloor", "bindingDecay", stacks)
  SELECT ${termsKeySql}, s.l, s."computeCoeff", s."memoryCoeff", s."syncCoeff", s."routingCoeff", s."bindingFloor", s."bindingDecay", SUM(s.n)::int
  FROM ${from} s WHERE s.l + 1 + ${tailSql} > $1::int GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 HAVING SUM(s.n) <> 0
  ON CONFLICT (terms, "lastActiveEpoch") DO UPDATE SET stacks = "EmissionCohort".stacks + EXCLUDED.stacks`;

/**
 * Tallies these (locked) stacks: they join the running floor sums (their count and floor amounts
 * are returned) and their cohort, at the lastActiveEpoch before their oldest run not counted yet
 * (the epoch statement moves them along their runs from there).
 */
export function tallyQuery(epoch: number, stackIds: string[]): Sql {
  const floors = ACCRUAL_TOKENS.map(([t, coeff]) => `COALESCE(SUM(${amountSql(coeff, tailSql)}), 0)::text AS ${t}`).join(', ');
  return numberedSql(
    `WITH t AS (
       UPDATE "EmissionAccrual" a SET tallied = true WHERE a."stackId" = ANY($2::text[]) AND NOT a.tallied RETURNING a.*
     ), j AS (
       SELECT t.*, 1 AS n, COALESCE((SELECT r."lastActiveEpoch" FROM "EmissionRun" r WHERE r."stackId" = t."stackId" AND NOT r.counted
         ORDER BY r."toEpoch" LIMIT 1), t."lastActiveEpoch") AS l FROM t
     ), c AS (${addToCohorts('j')})
     SELECT COUNT(*)::text AS n, ${floors} FROM t s`,
    [epoch, stackIds],
  );
}

/** The stacks tallied since the last recorded epoch and their floor amounts (milli), carried into its running sums. */
type Joined = { n: bigint } & MilliAmounts;

const COHORT_TERMS = ['computeCoeff', 'memoryCoeff', 'syncCoeff', 'routingCoeff', 'bindingFloor', 'bindingDecay'];
const EMISSION_COHORT_COLS = COHORT_TERMS.map((c) => `"${c}"`).join(', ');

/**
 * The emitter's statement for `epoch`, after its lock: one round trip for the epoch's whole work
 * when no stack is new (it was five: the recorded epochs, the runs, the cohorts, the record). In
 * the snapshot the lock let through, `em_go` says whether `epoch` (or a later one) is recorded and
 * whether stacks that begin accruing by it are not tallied yet; only when neither, the rest runs:
 *
 * * the runs closed before `epoch` that no epoch counted (the activity since the last one, late
 *   commits included; on the partial index of the uncounted ones) are counted, each moving its
 *   stack from its lastActiveEpoch's cohort to its toEpoch's (`em_moves`, summed by cohort: each
 *   run's terms are one probe of the accrual's key; a join against the whole table hashed every
 *   stack's accrual row, 150-280 ms an epoch at 100,000 stacks);
 * * the cohorts at their floor by `epoch` (nothing over the floor sums ever again) or empty are
 *   dropped, but not one the moves change (a row is changed once in a statement);
 * * the stacks not at their floor and their amounts less the floor amounts already in the running
 *   sums, summed by cohort (every stack of one has the same amount) over the cohorts as they were
 *   plus the moves, which is what they are after them: O(cohorts), whatever the number of stacks;
 * * the epoch's record: the last record's running sums plus `joined` (the stacks tallied since) and
 *   those amounts, with its intent for QuellistTreasury.
 */
export function emitEpochParts(epoch: number, joined: Joined): StatementPart[] {
  const go = `(SELECT fresh AND NOT untallied FROM em_go)`;
  const p = (text: string) => numberedSql(text, [epoch]);
  const over = ACCRUAL_TOKENS.map(
    ([t, coeff]) => `COALESCE(SUM(s.n::bigint * (${amountSql(coeff, '$1::int - 1 - s.l')} - ${amountSql(coeff, tailSql)})), 0) AS ${t}`,
  ).join(', ');
  const v = (x: bigint) => x.toString();
  const totals = ACCRUAL_TOKENS.map(
    ([t], i) =>
      `COALESCE(r."${FLOOR_COLS[t]}", 0) + $${i + 3}::bigint AS "${FLOOR_COLS[t]}", COALESCE(r."${FLOOR_COLS[t]}", 0) + $${i + 3}::bigint + a.${t} AS ${t}`,
  ).join(', ');
  return [
    {
      ctes: [
        {
          name: 'em_go',
          body: p(`SELECT NOT EXISTS (SELECT 1 FROM "EmissionEpoch" WHERE epoch >= $1::int) AS fresh,
            EXISTS (SELECT 1 FROM "EmissionAccrual" WHERE NOT tallied AND "sinceEpoch" <= $1::int) AS untallied`),
        },
        {
          name: 'em_runs',
          body: p(`UPDATE "EmissionRun" SET counted = true WHERE NOT counted AND "toEpoch" < $1::int AND ${go}
            RETURNING "stackId", "lastActiveEpoch", "toEpoch"`),
        },
        {
          name: 'em_moves',
          body: p(`SELECT ${termsKeySql} AS terms, s.l, ${COHORT_TERMS.map((c) => `s."${c}"`).join(', ')}, SUM(s.n)::int AS n
            FROM (SELECT a.*, x.l, x.n FROM em_runs r
              CROSS JOIN LATERAL (SELECT ${EMISSION_COHORT_COLS} FROM "EmissionAccrual" a WHERE a."stackId" = r."stackId" LIMIT 1) a
              CROSS JOIN LATERAL (VALUES (r."lastActiveEpoch", -1), (r."toEpoch", 1)) x(l, n)) s
            WHERE s.l + 1 + ${tailSql} > $1::int GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 HAVING SUM(s.n) <> 0`),
        },
        {
          name: 'em_cohorts',
          body: p(`INSERT INTO "EmissionCohort" (terms, "lastActiveEpoch", ${EMISSION_COHORT_COLS}, stacks)
            SELECT terms, l, ${EMISSION_COHORT_COLS}, n FROM em_moves
            ON CONFLICT (terms, "lastActiveEpoch") DO UPDATE SET stacks = "EmissionCohort".stacks + EXCLUDED.stacks`),
        },
        {
          name: 'em_gone',
          body: p(`DELETE FROM "EmissionCohort" s WHERE (s.stacks = 0 OR s."lastActiveEpoch" + 1 + ${tailSql} <= $1::int) AND ${go}
            AND NOT EXISTS (SELECT 1 FROM em_moves m WHERE m.terms = s.terms AND m.l = s."lastActiveEpoch")`),
        },
        {
          name: 'em_over',
          body: p(`SELECT COALESCE(SUM(s.n), 0)::bigint AS n, ${over} FROM (
              SELECT ${EMISSION_COHORT_COLS}, s."lastActiveEpoch" AS l, s.stacks AS n FROM "EmissionCohort" s
              WHERE s.stacks <> 0 AND s."lastActiveEpoch" + 1 + ${tailSql} > $1::int
              UNION ALL SELECT ${EMISSION_COHORT_COLS}, l, n FROM em_moves) s`),
        },
        {
          name: 'em_epoch',
          body: numberedSql(
            `INSERT INTO "EmissionEpoch" (epoch, stacks, "floorCompute", compute, "floorMemory", memory, "floorSync", sync, "floorRouting", routing)
             SELECT $1::int, COALESCE(r.stacks, 0) + $2::int, ${totals} FROM em_over a
             LEFT JOIN (SELECT * FROM "EmissionEpoch" ORDER BY epoch DESC LIMIT 1) r ON true WHERE ${go}
             RETURNING epoch, stacks, compute, memory, sync, routing`,
            [epoch, Number(joined.n), v(joined.compute), v(joined.memory), v(joined.sync), v(joined.routing)],
          ),
        },
        {
          // One QuellistTreasury record per epoch; tokens are minted to a stack on chain when claimed.
          name: 'em_intent',
          body: sql`SELECT 'emission:' || e.epoch AS ref, e.epoch, jsonb_build_object('epoch', e.epoch, 'stacks', e.stacks, 'totalsMilli',
              jsonb_build_object('compute', e.compute::text, 'memory', e.memory::text, 'sync', e.sync::text, 'routing', e.routing::text)) AS payload
            FROM em_epoch e WHERE e.stacks > 0`,
        },
      ],
      outputs: [
        { name: 'fresh', expr: sql`(SELECT fresh FROM em_go)` },
        { name: 'untallied', expr: sql`(SELECT untallied FROM em_go)` },
        { name: 'runs', expr: sql`(SELECT count(*)::int FROM em_runs)` },
        { name: 'computed', expr: sql`(SELECT n::text FROM em_over)` },
        { name: 'stacks', expr: sql`(SELECT stacks FROM em_epoch)` },
      ],
    },
    computedIntentsPart('emission', 'em_intent', 'emission_intent'),
    watchedStacksPart(),
  ];
}

/** The statements the emitter runs for `epoch` whose cost depends on the data (bench/emitter-explain.ts EXPLAINs them). */
export function emitterStatements(epoch: number): Array<[string, Sql]> {
  return [
    ['the stacks not tallied yet (untalliedQuery)', untalliedQuery(epoch, TALLY_BATCH)],
    ['their tally (tallyQuery, none here)', tallyQuery(epoch, [])],
    ['the epoch: the runs, the cohorts, the record (emitEpochParts)', composeStatement(emitEpochParts(epoch, NONE_JOINED)).sql],
  ];
}

const NONE_JOINED: Joined = { n: 0n, compute: 0n, memory: 0n, sync: 0n, routing: 0n };

/**
 * The emitter pass for epoch `epoch`: records the epoch's emission over all stacks (one
 * QuellistTreasury record, as before) and publishes the emission events of watched stacks. Its
 * cost is what changed: the stacks new since the last epoch join the running sum of floor amounts
 * and their cohort once, the runs closed since (the stacks that were active) move their stacks
 * between cohorts, and the amounts over the floor are summed by cohort, not by stack. Idempotent
 * per epoch, also across concurrent emitters; an epoch older than one already recorded is not
 * recorded any more (the running sums have moved past it).
 */
export async function emitEpoch(p: Platform, epoch: number): Promise<{ epoch: number; stacks: number; computed?: number; runs?: number; watched?: number }> {
  return p.db.prisma.$transaction(
    async (tx) => {
      // Four round trips when no stack is new (each one, in a process whose event loop and pool the
      // writers share, costs more than its query; there were seven): BEGIN, the lock, the epoch's
      // statement, COMMIT. The lock is its own statement: a statement's snapshot is taken when it
      // starts, so one that waited for the lock inside it would not see what the emitter before it
      // recorded.
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('cog-emission-epoch'))`;
      const joined = { ...NONE_JOINED };
      for (;;) {
        const out = await runStatement(tx, emitEpochParts(epoch, joined));
        if (out.fresh !== true) return { epoch, stacks: 0 };
        if (out.untallied !== true) {
          const watched = watchedOf(out);
          // Events only for the stacks a subscriber watches: an idle stack nobody listens to costs nothing.
          for (const e of await computedEmissions(tx, watched, epoch, 1, epoch)) {
            const v = eventView(e);
            await recordEvent(tx, {
              subject: `cog.treasury.emitted.${e.stackId}`,
              type: 'treasury.emitted',
              msgId: `treasury-emitted:${e.stackId}:${epoch}`,
              data: { stackId: e.stackId, epoch, amounts: v.amounts, ebcFactor: e.ebcFactor },
            });
          }
          return { epoch, stacks: Number(out.stacks), computed: Number(out.computed), runs: Number(out.runs), watched: watched.length };
        }
        // Stacks that begin accruing by this epoch join the running sums and their cohort once, in
        // batches (the first epoch over a bulk of fixtures takes them all), before the epoch's statement.
        for (;;) {
          const ids = (await tx.$queryRaw<{ stackId: string }[]>(untalliedQuery(epoch, TALLY_BATCH))).map((r) => r.stackId);
          if (!ids.length) break;
          const [t] = await tx.$queryRaw<Array<Record<keyof Joined, string>>>(tallyQuery(epoch, ids));
          for (const k of Object.keys(joined) as Array<keyof Joined>) joined[k] += BigInt(t![k]);
          if (ids.length < TALLY_BATCH) break;
        }
      }
    },
    { timeout: 120_000 },
  );
}

const unitsOf = (m: MilliAmounts): CoreAmounts => ({
  compute: fromMilli(m.compute),
  memory: fromMilli(m.memory),
  sync: fromMilli(m.sync),
  routing: fromMilli(m.routing),
});

function eventView(e: ComputedEmission): EmissionEvent {
  return {
    id: `emission:${e.stackId}:${e.epoch}`,
    stackId: e.stackId,
    epoch: e.epoch,
    amounts: unitsOf(e.milli),
    cpv: e.cpv,
    ebcFactor: e.ebcFactor,
    createdAt: e.createdAt.toISOString(),
  };
}

export function emissionView(r: {
  id: string;
  stackId: string;
  epoch: number;
  amounts: unknown;
  cpv: unknown;
  ebcFactor: number;
  createdAt: Date;
}): EmissionEvent {
  const a = r.amounts as Record<string, number>;
  return {
    id: r.id,
    stackId: r.stackId,
    epoch: r.epoch,
    amounts: { compute: Number(a.compute), memory: Number(a.memory), sync: Number(a.sync), routing: Number(a.routing) },
    cpv: r.cpv as Cpv,
    ebcFactor: r.ebcFactor,
    createdAt: r.createdAt.toISOString(),
  };
}

/**
 * The newest `limit` emission events of each stack as of the current epoch, newest first: computed
 * for the epochs it accrued in closed form, then the per-epoch rows written before (if any).
 */
export async function issuanceOf(p: Platform, db: Db | Tx, stackIds: string[], limit = 100): Promise<Map<string, EmissionEvent[]>> {
  const out = new Map<string, EmissionEvent[]>(stackIds.map((id) => [id, []]));
  if (!stackIds.length || limit <= 0) return out;
  for (const e of await computedEmissions(db, stackIds, p.epochs.current(), limit)) out.get(e.stackId)?.push(eventView(e));
  // The per-epoch rows written before a stack accrued in closed form (epochs before its since).
  const short = stackIds.filter((id) => out.get(id)!.length < limit);
  if (short.length) {
    const rows = await db.$queryRaw<Array<{ id: string; stackId: string; epoch: number; amounts: unknown; cpv: unknown; ebcFactor: number; createdAt: Date }>>`
      SELECT id, "stackId", epoch, amounts, cpv, "ebcFactor", "createdAt" FROM (
        SELECT e.*, row_number() OVER (PARTITION BY e."stackId" ORDER BY e.epoch DESC) AS rn
        FROM "Emission" e LEFT JOIN "EmissionAccrual" a ON a."stackId" = e."stackId"
        WHERE e."stackId" = ANY(${short}) AND (a."sinceEpoch" IS NULL OR e.epoch < a."sinceEpoch")
      ) t WHERE rn <= ${limit} ORDER BY epoch DESC`;
    // Raw rows: what a driver may hand back as text is parsed (jsonValue).
    for (const r of rows) {
      const list = out.get(r.stackId)!;
      if (list.length < limit) list.push(emissionView({ ...r, amounts: jsonValue(r.amounts), cpv: jsonValue(r.cpv), createdAt: new Date(r.createdAt) }));
    }
  }
  return out;
}

/** The last 100 emission events of a stack, newest first (404 for an unknown stack). */
export async function issuance(p: Platform, stackId: string, limit = 100): Promise<EmissionEvent[]> {
  await holders(p).stackTerms(p.db.prisma, stackId);
  return (await issuanceOf(p, p.db.prisma, [stackId], limit)).get(stackId)!;
}

/** Emission events by id (`emission:<stackId>:<epoch>`), computed like the issuance list; null when unknown. */
export async function emissionsById(p: Platform, ids: readonly string[]): Promise<Array<EmissionEvent | null>> {
  const out = new Map<string, EmissionEvent>();
  const now = p.epochs.current();
  for (const id of new Set(ids)) {
    const m = /^emission:(.+):(\d{1,9})$/.exec(id);
    if (!m) continue;
    const [, stackId, e] = m;
    const [computed] = await computedEmissions(p.db.prisma, [stackId!], now, now - Number(e) + 1, Number(e));
    if (computed) out.set(id, eventView(computed));
  }
  const legacy = ids.filter((id) => !out.has(id));
  if (legacy.length) for (const r of await p.db.prisma.emission.findMany({ where: { id: { in: legacy } } })) out.set(r.id, emissionView(r));
  return ids.map((id) => out.get(id) ?? null);
}

export interface ClaimResult {
  stackId: string;
  claimable: CoreAmounts;
}

/** Moves everything claimable into the stack pool; returns what moved (zeros when nothing). */
export async function claim(p: Platform, stackId: string): Promise<ClaimResult> {
  await holders(p).stackTerms(p.db.prisma, stackId);
  const epoch = p.epochs.current();
  return p.db.prisma.$transaction(async (tx) => {
    // What accrued since the last settlement is posted from the treasury now, in one posting.
    const accrued = await takeAccrued(tx, stackId, epoch);
    const legs = ACCRUAL_TOKENS.filter(([t]) => accrued[t] > 0n).flatMap(([t]) => [
      { account: SYSTEM.treasury, token: t as Token, milli: -accrued[t] },
      { account: claimableAccount(stackId), token: t as Token, milli: accrued[t] },
    ]);
    if (legs.length) await post(tx, { reason: 'emission', ref: `emission:${stackId}:${epoch}`, epoch, legs });
    // Row locks serialise concurrent claims: the second sees what the first left (zero).
    const rows = await tx.$queryRaw<
      { token: string; milli: bigint }[]
    >`SELECT token, milli FROM "Balance" WHERE account = ${claimableAccount(stackId)} FOR UPDATE`;
    const moves = rows
      .filter((r) => r.milli > 0n && (CORE_TOKENS as readonly string[]).includes(r.token))
      .map((r) => ({ token: r.token as Token, milli: BigInt(r.milli) }));
    const claimed: CoreAmounts = { compute: 0, memory: 0, sync: 0, routing: 0 };
    if (!moves.length) return { stackId, claimable: claimed };
    const txId = await transfer(tx, claimableAccount(stackId), poolAccount(stackId), moves, { reason: 'claim', ref: `claim:${stackId}`, epoch });
    for (const m of moves) claimed[m.token as keyof CoreAmounts] = fromMilli(m.milli);
    await enqueueChainTx(tx, {
      kind: 'mint',
      ref: `ledger:${txId}`,
      epoch,
      payload: { stackId, amounts: moves.map((m) => ({ token: m.token, milli: m.milli.toString() })), reason: 'claim' },
    });
    await recordEvent(tx, {
      subject: `cog.treasury.claimed.${stackId}`,
      type: 'treasury.claimed',
      data: { stackId, epoch, claimed },
      msgId: `treasury-claimed:${txId}`,
    });
    return { stackId, claimable: claimed };
  });
}

/** What stacks could claim now, without claiming: the claimable balance plus what accrued since. */
export async function claimableOf(db: Db | Tx, stackIds: string[], epoch: number): Promise<Map<string, CoreAmounts>> {
  const bal = await balancesOf(db, stackIds.map(claimableAccount));
  const accrued = await accruedOf(db, stackIds, epoch);
  return new Map(
    stackIds.map((id) => {
      const b = bal.get(claimableAccount(id))!;
      const a = accrued.get(id) ?? { compute: 0n, memory: 0n, sync: 0n, routing: 0n };
      const m = (t: keyof MilliAmounts) => fromMilli(BigInt(Math.round(b[t] * 1000)) + a[t]);
      return [id, { compute: m('compute'), memory: m('memory'), sync: m('sync'), routing: m('routing') }];
    }),
  );
}

export interface StackBalancesB {
  raw: TokenAmounts;
  effective: TokenAmounts;
  cpv: Cpv;
  lastActiveEpoch: number;
  currentEpoch: number;
  ebcFactor: number;
}

/** Shape B balances: raw = alive sleeves + pool; effective = raw x coeff x EBC (residue: no decay). */
export async function stackBalancesB(p: Platform, stackId: string): Promise<StackBalancesB> {
  // The stack's terms (404 for an unknown stack) and the economy's own lastActiveEpoch (none for a
  // stack row inserted around createStack).
  const [stack, last] = await Promise.all([holders(p).stackTerms(p.db.prisma, stackId), lastActiveEpochs(p.db.prisma, [stackId])]);
  const lastActiveEpoch = last.get(stackId) ?? NEVER_ACTIVE;
  const sleeves = await holders(p).aliveSleeveIds(p.db.prisma, stackId);
  const accounts = [poolAccount(stackId), ...sleeves.map(sleeveAccount)];
  const byAccount = await balancesOf(p.db.prisma, accounts);
  const currentEpoch = p.epochs.current();
  const factor = ebcFactor({ floor: stack.bindingFloor, decayRate: stack.bindingDecay }, currentEpoch - lastActiveEpoch);
  const cpv = cpvOf(stack);
  const raw = {} as TokenAmounts;
  const effective = {} as TokenAmounts;
  for (const t of TOKENS) {
    let milli = 0;
    for (const a of byAccount.values()) milli += Math.round(a[t] * 1000);
    raw[t] = milli / 1000;
    effective[t] = round3(raw[t] * cpv[COEFF[t]] * (t === 'residue' ? 1 : factor));
  }
  return { raw, effective, cpv, lastActiveEpoch, currentEpoch, ebcFactor: factor };
}
