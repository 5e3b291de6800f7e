// The scale bench's pieces (bench/scale.ts) at a tiny size on PostgreSQL: the bulk fixtures are what
// the platform would have written (sealed secrets it can open, one lease per alive sleeve, accrual
// rows the emitter tallies), the idle-stack count sees a row written for an idle stack and none for
// a writing one, and the figures read from Prometheus text and WAL positions are right.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromHex } from '../lib/crypto.ts';
import { emitEpoch, markActive } from '../subgraphs/economy/index.ts';
import { getStackRow, stackMasterSecret } from '../subgraphs/stacks/index.ts';
import {
  CREATED_EPOCH,
  histogramBuckets,
  idleOfFixtures,
  idleStackRows,
  insertFixtures,
  lsnBytes,
  quantileBetween,
  rowsBetween,
  sleeveId,
  stackId,
} from '../bench/scale.ts';
import { testPlatformOn, type TestPlatform } from './helpers/platform.ts';

const size = { stacks: 300, sleeves: 700, ticking: 40, tickRateMs: 8000 };

describe('bench/scale.ts at a tiny size', () => {
  let p: TestPlatform;
  let db: pg.Client;
  const key = randomBytes(32).toString('hex');
  beforeAll(async () => {
    p = await testPlatformOn('postgresql');
    p.masterKey = fromHex(key);
    db = new pg.Client({ connectionString: p.config.databaseUrl });
    await db.connect();
    await insertFixtures(db, size, key);
  }, 120_000);
  afterAll(async () => {
    await db?.end();
    await p?.cleanup();
  });

  const count = async (q: string) => Number((await db.query<{ n: string }>(q)).rows[0]!.n);

  it('fixtures: stacks, sleeves (the first ones alive, one on each of the first stacks), leases, compute, accrual rows the emitter tallies', async () => {
    expect(await count('SELECT count(*) AS n FROM "Stack"')).toBe(300);
    expect(await count('SELECT count(*) AS n FROM "Sleeve"')).toBe(700);
    expect(await count('SELECT count(*) AS n FROM "Sleeve" WHERE alive')).toBe(40);
    expect(await count('SELECT count(*) AS n FROM "SleeveLease"')).toBe(40);
    expect(await count(`SELECT count(*) AS n FROM "Balance" WHERE account LIKE 'sleeve:%' AND milli > 0`)).toBe(40);
    // Sleeve g is on stack ((g - 1) mod stacks) + 1, with the ids the bench's writers send.
    const s = await db.query<{ stackId: string; alive: boolean }>(`SELECT "stackId", alive FROM "Sleeve" WHERE id = $1`, [sleeveId(7)]);
    expect(s.rows).toEqual([{ stackId: stackId(7), alive: true }]);
    const dead = await db.query<{ stackId: string; alive: boolean }>(`SELECT "stackId", alive FROM "Sleeve" WHERE id = $1`, [sleeveId(307)]);
    expect(dead.rows).toEqual([{ stackId: stackId(7), alive: false }]);
    // A writing stack's secret opens with the platform's key.
    expect(stackMasterSecret(p, await getStackRow(p.db.prisma, stackId(3))).byteLength).toBe(32);
    // Every stack is idle at its floor: the first epoch tallies all of them, none computed one by one.
    expect(await count(`SELECT count(*) AS n FROM "EmissionAccrual" WHERE "lastActiveEpoch" = ${CREATED_EPOCH} AND "floorEpoch" <= 0`)).toBe(300);
    expect(await emitEpoch(p, 0)).toMatchObject({ stacks: 300, computed: 0 });
  });

  it('idle-stack rows: a write for an idle stack is counted where it lands, one for a writing stack is not', async () => {
    // The fixtures' and the tally's statistics first (300 inserted, 300 tallied), so the deltas below are this test's.
    for (let i = 0; i < 60; i++) {
      const r = await db.query<{ ins: string; upd: string }>(
        `SELECT n_tup_ins AS ins, n_tup_upd AS upd FROM pg_stat_user_tables WHERE relname = 'EmissionAccrual'`,
      );
      if (Number(r.rows[0]?.ins) === 300 && Number(r.rows[0]?.upd) >= 300) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const before = (
      await db.query<{ relname: string; ins: string; upd: string; del: string }>(
        'SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del FROM pg_stat_user_tables',
      )
    ).rows;
    const [{ xid }] = (await db.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid')).rows;
    const idle = idleOfFixtures(size.ticking);
    expect([...(await idleStackRows(db, BigInt(xid!), idle)).values()].every((n) => n === 0)).toBe(true);
    // Stack 5 has a sleeve (it writes), stack 100 does not (idle): each becomes active once.
    await p.db.prisma.$transaction(async (tx) => {
      expect(await markActive(tx, stackId(5), 1)).toBe(true);
      expect(await markActive(tx, stackId(100), 1)).toBe(true);
    });
    await db.query(`UPDATE "Sleeve" SET "driftMilli" = 1 WHERE id = $1`, [sleeveId(300 + 120)]); // a dead sleeve of idle stack 120
    const rows = await idleStackRows(db, BigInt(xid!), idle);
    expect(Object.fromEntries([...rows].filter(([, n]) => n))).toEqual({ EmissionAccrual: 1, EmissionRun: 1, Sleeve: 1 });
    // The per-table deltas see both stacks' writes once the writing backends flushed their
    // statistics (within PGSTAT_IDLE_INTERVAL, 10 s, of going idle): the bench's per-epoch rows
    // may lag by that much, its sum over the run does not.
    const m = (rs: typeof before) => new Map(rs.map((r) => [r.relname, { ins: Number(r.ins), upd: Number(r.upd), del: Number(r.del) }]));
    let d = new Map<string, number>();
    for (let i = 0; i < 60 && !(d.get('EmissionRun') === 2 && d.get('EmissionAccrual') === 2); i++) {
      await new Promise((r) => setTimeout(r, 250));
      const after = await db.query<{ relname: string; ins: string; upd: string; del: string }>(
        'SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del FROM pg_stat_user_tables',
      );
      d = rowsBetween(m(before), m(after.rows));
    }
    expect(d.get('EmissionRun')).toBe(2);
    expect(d.get('EmissionAccrual')).toBe(2);
  }, 30_000);

  it('figures: p99 from histogram buckets between two scrapes, WAL bytes between positions', () => {
    const scrape = (c: number[]) =>
      [0.01, 0.1, 1, '+Inf'].map((le, i) => `cog_sleeve_tick_lateness_seconds_bucket{le="${le}"} ${c[i]}`).join('\n') + '\ncog_other_bucket{le="1"} 7\n';
    const a = histogramBuckets(scrape([10, 10, 10, 10]), 'cog_sleeve_tick_lateness_seconds');
    // 100 more: 90 under 10 ms, 9 in 10-100 ms, 1 in 100 ms-1 s.
    const b = histogramBuckets(scrape([100, 109, 110, 110]), 'cog_sleeve_tick_lateness_seconds');
    expect(quantileBetween(a, b, 0.99)).toBeCloseTo(0.1, 6);
    expect(quantileBetween(a, b, 0.5)).toBeCloseTo(0.01 * (50 / 90), 6);
    expect(quantileBetween(a, a, 0.99)).toBeUndefined();
    expect(lsnBytes('0/FFFFFFF0', '1/10')).toBe(32);
  });
});
