// The Treasury: per-epoch emission of the four core tokens per stack, scaled by the CPV and
// decayed by the stack's EBC binding, accrued as claimable; a claim moves it into the stack pool.
// Emission accrues in closed form (accrual.ts): nothing is written per stack per epoch. The
// emitter pass writes one EmissionEpoch row (the epoch's totals for the on-chain record, kept as
// running sums and cohorts so it costs what changed) and the events of the stacks someone
// subscribed to.
import type { Db, Sql, Tx } from '../../lib/db/index.ts';
import { jsonValue, numberedSql, runStatement, type StatementPart } from '../../lib/db/statement.ts';
import { recordEvent } from '../../lib/events.ts';
import type { Platform } from '../../lib/platform.ts';
import { chainIntentsPart, enqueueChainTx } from '../chains/index.ts';
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
 * The emitter's first read, after its lock: whether `epoch` (or a later one) is recorded already,
 * the last recorded epoch's running sums (bigints as text), and the first batch of the stacks to
 * tally (untalliedQuery's, locked the same way), in one round trip.
 */
export function emitterStartQuery(epoch: number, limit: number): Sql {
  const sums = ['stacks', ...Object.values(FLOOR_COLS)].map((c) => `'${c}', e."${c}"::text`).join(', ');
  return numberedSql(
    `WITH u AS (
       SELECT "stackId" FROM "EmissionAccrual" WHERE NOT tallied AND "sinceEpoch" <= $1::int ORDER BY "stackId" LIMIT $2::int FOR UPDATE
     ) SELECT (SELECT count(*) FROM "EmissionEpoch" WHERE epoch >= $1::int)::int AS done,
       (SELECT json_build_object(${sums}) FROM "EmissionEpoch" e ORDER BY e.epoch DESC LIMIT 1) AS prev,
       (SELECT COALESCE(array_agg("stackId" ORDER BY "stackId"), '{}') FROM u) AS ids`,
    [epoch, limit],
  );
}

/** The epoch's record of the running sums, as part of the emitter's last statement. */
function emissionEpochPart(epoch: number, stacks: number, floor: MilliAmounts, total: MilliAmounts): StatementPart {
  const v = (x: bigint) => x.toString();
  return {
    ctes: [
      {
        name: 'emission_epoch',
        body: numberedSql(
          `INSERT INTO "EmissionEpoch" (epoch, stacks, "floorCompute", "floorMemory", "floorSync", "floorRouting", compute, memory, sync, routing)
           VALUES ($1::int, $2::int, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::bigint)`,
          [
            epoch,
            stacks,
            v(floor.compute),
            v(floor.memory),
            v(floor.sync),
            v(floor.routing),
            v(total.compute),
            v(total.memory),
            v(total.sync),
            v(total.routing),
          ],
        ),
      },
    ],
  };
}

/**
 * Adds the rows of `from` (aliased s: the terms, `l` a lastActiveEpoch, `n` stacks) to their
 * cohorts, but not to those at their floor by epoch $1 (they add nothing from then on, and
 * cohortSumQuery drops them).
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
 * (countRunsQuery moves them along their runs from there).
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

/**
 * Counts the runs closed before `epoch` that the emitter has not counted (the activity since its
 * last epoch, late commits included; on the partial index of the uncounted ones): each moves its
 * stack from the run's lastActiveEpoch's cohort to its toEpoch's. O(runs counted): each run's terms
 * are one probe of the accrual's key (a LIMIT keeps the planner from joining the runs against the
 * whole table: with a thousand runs it hashed every stack's accrual row, 150-280 ms an epoch at
 * 100,000 stacks).
 */
export function countRunsQuery(epoch: number): Sql {
  return numberedSql(
    `WITH r AS (
       UPDATE "EmissionRun" SET counted = true WHERE NOT counted AND "toEpoch" < $1::int RETURNING "stackId", "lastActiveEpoch", "toEpoch"
     ), m AS (
       SELECT a."computeCoeff", a."memoryCoeff", a."syncCoeff", a."routingCoeff", a."bindingFloor", a."bindingDecay", x.l, x.n
       FROM r CROSS JOIN LATERAL (SELECT * FROM "EmissionAccrual" a WHERE a."stackId" = r."stackId" LIMIT 1) a
       CROSS JOIN LATERAL (VALUES (r."lastActiveEpoch", -1), (r."toEpoch", 1)) x(l, n)
     ), c AS (${addToCohorts('m')})
     SELECT count(*)::int AS runs FROM r`,
    [epoch],
  );
}

/**
 * The stacks not at their floor in `epoch` (count) and their amounts less the floor amounts already
 * in the running sums, summed by cohort (every stack of one has the same amount); the cohorts at
 * their floor from `epoch` on (nothing over the floor sums ever again) or empty are dropped.
 * O(cohorts): at most (distinct terms) x (epochs to the floor), whatever the number of stacks.
 */
export function cohortSumQuery(epoch: number): Sql {
  const near = ACCRUAL_TOKENS.map(
    ([t, coeff]) =>
      `COALESCE(SUM(s.stacks::bigint * (${amountSql(coeff, '$1::int - 1 - s."lastActiveEpoch"')} - ${amountSql(coeff, tailSql)})), 0)::text AS ${t}`,
  ).join(', ');
  return numberedSql(
    `WITH gone AS (
       DELETE FROM "EmissionCohort" s WHERE s.stacks = 0 OR s."lastActiveEpoch" + 1 + ${tailSql} <= $1::int
     ) SELECT COALESCE(SUM(s.stacks), 0)::text AS n, ${near} FROM "EmissionCohort" s
     WHERE s.stacks <> 0 AND s."lastActiveEpoch" + 1 + ${tailSql} > $1::int`,
    [epoch],
  );
}

/** The statements the emitter runs for `epoch` whose cost depends on the data (bench/emitter-explain.ts EXPLAINs them). */
export function emitterStatements(epoch: number): Array<[string, Sql]> {
  return [
    ['the recorded epochs and the new stacks (emitterStartQuery)', emitterStartQuery(epoch, TALLY_BATCH)],
    ['their tally (tallyQuery, none here)', tallyQuery(epoch, [])],
    ['the runs closed since (countRunsQuery)', countRunsQuery(epoch)],
    ['the cohorts not at their floor (cohortSumQuery)', cohortSumQuery(epoch)],
  ];
}

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
      // Seven round trips when no stack is new (each one, in a process whose event loop and pool the
      // writers share, costs more than its query): the lock, one read, the tally of the new stacks
      // (when there are), the runs, the cohorts, and one statement for the record, its chain intent
      // and the watched stacks.
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('cog-emission-epoch'))`;
      const [start] = await tx.$queryRaw<Array<{ done: number; prev: Record<string, string> | string | null; ids: string[] }>>(
        emitterStartQuery(epoch, TALLY_BATCH),
      );
      if (start!.done > 0) return { epoch, stacks: 0 };
      const prev = jsonValue(start!.prev) as Record<string, string> | null;
      // Stacks that begin accruing by this epoch join the running sums and their cohort once.
      const joined = { n: 0n, compute: 0n, memory: 0n, sync: 0n, routing: 0n };
      for (let ids = start!.ids; ids.length; ) {
        const [t] = await tx.$queryRaw<Array<Record<keyof typeof joined, string>>>(tallyQuery(epoch, ids));
        for (const k of Object.keys(joined) as Array<keyof typeof joined>) joined[k] += BigInt(t![k]);
        if (ids.length < TALLY_BATCH) break;
        ids = (await tx.$queryRaw<{ stackId: string }[]>(untalliedQuery(epoch, TALLY_BATCH))).map((r) => r.stackId);
      }
      // The activity since: each run moves its stack to its new cohort.
      const [counted] = await tx.$queryRaw<{ runs: number }[]>(countRunsQuery(epoch));
      // The stacks not at their floor this epoch, by cohort: their amount less the floor amount already counted.
      const [above] = await tx.$queryRaw<Array<Record<string, string>>>(cohortSumQuery(epoch));
      const stacks = Number(prev?.stacks ?? 0) + Number(joined.n);
      const floor = {} as MilliAmounts;
      const total = {} as MilliAmounts;
      for (const [t] of ACCRUAL_TOKENS) {
        floor[t] = BigInt(prev?.[FLOOR_COLS[t]] ?? 0) + joined[t];
        total[t] = floor[t] + BigInt(above![t]!);
      }
      const out = await runStatement(
        tx,
        [
          emissionEpochPart(epoch, stacks, floor, total),
          // One QuellistTreasury record per epoch; tokens are minted to a stack on chain when claimed.
          stacks > 0
            ? chainIntentsPart(
                [
                  {
                    kind: 'emission',
                    ref: `emission:${epoch}`,
                    epoch,
                    payload: {
                      epoch,
                      stacks,
                      totalsMilli: {
                        compute: total.compute.toString(),
                        memory: total.memory.toString(),
                        sync: total.sync.toString(),
                        routing: total.routing.toString(),
                      },
                    },
                  },
                ],
                'emission_intent',
              )
            : null,
          watchedStacksPart(),
        ].filter((x): x is StatementPart => !!x),
      );
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
      return { epoch, stacks, computed: Number(above!.n), runs: Number(counted!.runs), watched: watched.length };
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
