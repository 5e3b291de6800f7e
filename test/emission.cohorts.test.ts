// The treasury-emitter in O(what changed) (docs/scale.md, "Per-epoch passes"): the epoch totals
// come from cohorts (stacks with the same emission terms and lastActiveEpoch) moved by the runs
// closed since the last epoch, and equal the per-epoch emitter's sum over every stack, also with
// activity committed after the emitter ran for its epoch and after the migration builds the
// cohorts of an existing database. What one epoch reads grows with the stacks that were active,
// not with the stacks; on PostgreSQL the runs are found on their partial index.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatformOn, type TestPlatform } from './helpers/platform.ts';
import { perEpochEmission } from './helpers/emission-oracle.ts';
import { generateIdentity } from '../lib/crypto.ts';
import { sql, type Sql } from '../lib/db/index.ts';
import { composeStatement } from '../lib/db/statement.ts';
import { createStack, markStackActive } from '../subgraphs/stacks/index.ts';
import { emitEpoch, emitEpochParts, untalliedQuery } from '../subgraphs/economy/treasury.ts';

const TOKENS = ['compute', 'memory', 'sync', 'routing'] as const;
const MIGRATION = path.join(import.meta.dirname, '..', 'prisma', 'migrations', '20261203064601_emission_cohorts', 'migration.sql');

describe.each(['pglite', 'postgresql'] as const)('the emitter by cohorts (%s)', (engine) => {
  let p: TestPlatform;
  const ids: string[] = [];
  let epoch = 0;

  beforeAll(async () => {
    p = await testPlatformOn(engine);
    p.setEpoch(0);
    // 60 stacks over three sets of terms.
    for (let i = 0; i < 60; i++) {
      const c = [1, 0.5, 2][i % 3]!;
      const v = await createStack(p, {
        pubkey: generateIdentity().pubKey,
        cpv: { computeCoeff: c, memoryCoeff: 1, syncCoeff: 2 - c / 2, routingCoeff: 1, residueCoeff: 1 },
      });
      ids.push(v.id);
    }
  }, 60_000);
  afterAll(async () => {
    await p?.cleanup();
  });

  const active = (id: string, e: number) => p.db.prisma.$transaction((tx) => markStackActive(tx, id, e));
  /** Emits `e` and checks its totals against the per-epoch sum over every stack, as of now. */
  const emitAndCheck = async (e: number) => {
    p.setEpoch(e);
    const oracle = [...(await perEpochEmission(p.db.prisma, e, ids)).values()];
    const r = await emitEpoch(p, e);
    const row = (await p.db.prisma.emissionEpoch.findUnique({ where: { epoch: e } }))!;
    expect(row.stacks).toBe(ids.length);
    for (const t of TOKENS) expect(row[t], `total ${t} of epoch ${e}`).toBe(oracle.reduce((x, o) => x + o[t], 0n));
    return r;
  };

  it('totals equal the sum over every stack; the runs read are the activity since, late commits included', async () => {
    for (epoch = 1; epoch <= 40; epoch++) {
      const r = await emitAndCheck(epoch);
      // Active in this epoch (after the emitter): 2 to 5 stacks, at changing places.
      const now = ids.filter((_, i) => (i * 7 + epoch * 3) % 17 === 0);
      for (const id of now) await active(id, epoch);
      // One committed late: active in the epoch before, after that epoch's emitter ran.
      if (epoch % 5 === 0) await active(ids[(epoch * 11) % ids.length]!, epoch - 1);
      if (epoch > 1) expect(r.runs, `runs counted at ${epoch}`).toBeGreaterThan(0);
    }
    // What is kept grows with the terms and the epochs to the floor, not with the stacks.
    const cohorts = await p.db.prisma.emissionCohort.count();
    expect(cohorts).toBeLessThanOrEqual(3 * 30);
    // Every run closed before the last emitter's epoch (40) is counted.
    expect(await p.db.prisma.emissionRun.count({ where: { counted: false, toEpoch: { lt: epoch - 2 } } })).toBe(0);
  }, 120_000);

  it('an idle epoch reads no run and sums the cohorts only; stacks back at their floor leave them', async () => {
    const r = await emitAndCheck(epoch); // the activity of the last test's final epoch
    expect(r.runs).toBeGreaterThan(0);
    for (let k = 1; k <= 35; k++) {
      const q = await emitAndCheck(epoch + k);
      expect(q.runs).toBe(0);
    }
    epoch += 35;
    expect(await p.db.prisma.emissionCohort.count()).toBe(0); // every stack at its floor
    expect((await emitAndCheck(++epoch)).computed).toBe(0);
  }, 120_000);

  it("the migration's cohorts of an existing database give the same totals", async () => {
    // Activity, then the state the migration starts from: no cohorts, no run counted.
    for (let k = 0; k < 6; k++) {
      await emitAndCheck(++epoch);
      for (const id of ids.filter((_, i) => (i + k) % 9 === 0)) await active(id, epoch);
    }
    await p.db.prisma.$executeRawUnsafe('DELETE FROM "EmissionCohort"');
    await p.db.prisma.$executeRawUnsafe('UPDATE "EmissionRun" SET counted = false');
    const text = fs.readFileSync(MIGRATION, 'utf8');
    await p.db.prisma.$executeRawUnsafe(text.slice(text.indexOf('INSERT INTO "EmissionCohort"')).trim().replace(/;$/, ''));
    for (let k = 0; k < 32; k++) {
      await emitAndCheck(++epoch);
      if (k < 4) for (const id of ids.filter((_, i) => (i + k) % 7 === 0)) await active(id, epoch);
    }
  }, 120_000);

  it.runIf(engine === 'postgresql')(
    'its statements run on their indexes: the uncounted runs and their terms, the untallied stacks',
    async () => {
      const plan = async (q: Sql) => (await p.db.prisma.$queryRaw<{ 'QUERY PLAN': string }[]>(sql`EXPLAIN ${q}`)).map((r) => r['QUERY PLAN']).join('\n');
      // Many tallied stacks and counted runs (the tables' steady state), then fresh statistics.
      await p.db.prisma.$executeRawUnsafe(`INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff",
        "bindingFloor", "bindingDecay", "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch", tallied)
      SELECT 'stack:plan:' || g, 1, 1, 1, 1, 1, 0.25, 0.05, 0, 1, 0, 30, true FROM generate_series(1, 20000) g`);
      // And many stacks analysed before they were tallied (bench/scale.ts: its fixtures are tallied
      // by the emitter's first epoch, after the statistics were taken).
      await p.db.prisma.$executeRawUnsafe(`INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff",
        "bindingFloor", "bindingDecay", "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch", tallied)
      SELECT 'stack:stale:' || g, 1, 1, 1, 1, 1, 0.25, 0.05, 0, 1, 0, 30, false FROM generate_series(1, 20000) g`);
      await p.db.prisma.$executeRawUnsafe('ANALYZE "EmissionAccrual"');
      await p.db.prisma.$executeRawUnsafe(`UPDATE "EmissionAccrual" SET tallied = true WHERE "stackId" LIKE 'stack:stale:%'`);
      const untallied = await plan(untalliedQuery(epoch + 1, 10_000));
      expect(untallied).toContain('EmissionAccrual_untallied_idx');
      expect(untallied).not.toContain('EmissionAccrual_pkey');
      await p.db.prisma.$executeRawUnsafe(`INSERT INTO "EmissionRun" ("stackId", "fromEpoch", "toEpoch", "lastActiveEpoch", counted)
      SELECT 'stack:plan:' || g, 1, g % 100 + 1, 0, true FROM generate_series(1, 20000) g`);
      // And the last epoch's 2,000 active stacks, not counted yet.
      await p.db.prisma.$executeRawUnsafe(`INSERT INTO "EmissionRun" ("stackId", "fromEpoch", "toEpoch", "lastActiveEpoch", counted)
      SELECT 'stack:stale:' || g, 1, ${epoch}, 0, false FROM generate_series(1, 2000) g`);
      await p.db.prisma.$executeRawUnsafe('ANALYZE');
      // (Counted at a later epoch, so the estimate takes in every uncounted run.)
      const none = { n: 0n, compute: 0n, memory: 0n, sync: 0n, routing: 0n };
      const runs = await plan(composeStatement(emitEpochParts(epoch + 1000, none)).sql);
      expect(runs).toContain('EmissionRun_uncounted_idx');
      expect(runs).not.toMatch(/Seq Scan on "EmissionRun"/);
      // Each run's terms by the accrual's key, not a join against every stack's accrual row.
      expect(runs).toContain('EmissionAccrual_pkey');
      expect(runs).not.toMatch(/Seq Scan on "EmissionAccrual"/);
      expect(await plan(untalliedQuery(epoch + 1, 10_000))).toContain('EmissionAccrual_untallied_idx');
      // The epoch's question whether a stack is untallied is a probe of the partial index too.
      expect(runs).toContain('EmissionAccrual_untallied_idx');
    },
    60_000,
  );
});
