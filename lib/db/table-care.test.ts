// Table care (lib/db/table-care.ts) on PGlite and on this machine's PostgreSQL: a table past
// autovacuum's thresholds is vacuumed (its dead row versions gone) and analysed, a quiet one is left
// alone, PGlite leaves a table over its size limit to an analyse, and 'off' does nothing.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../log.ts';
import { testPlatformOn, type TestPlatform } from '../../test/helpers/platform.ts';
import { startTableCare, type TableCare } from './table-care.ts';

for (const engine of ['pglite', 'postgresql'] as const) {
  describe(`table care on ${engine}`, () => {
    let p: TestPlatform;
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger({
      level: 'debug',
      destination: new Writable({
        write(chunk, _enc, done) {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    });
    const cares: TableCare[] = [];
    beforeAll(async () => {
      p = await testPlatformOn(engine);
    }, 60_000);
    afterAll(async () => {
      for (const c of cares) await c.close();
      await p?.cleanup();
    });
    const care = (opts: Parameters<typeof startTableCare>[2]) => {
      const c = startTableCare(p.db, log, { everyMs: 3_600_000, ...opts });
      cares.push(c);
      return c;
    };
    const q = <R>(text: string) => p.db.driver.query<R>(text);
    const stat = async (table: string) => {
      await q('SELECT pg_stat_force_next_flush()');
      const [r] = await q<{ dead: string; vacuums: string; analyses: string }>(
        `SELECT n_dead_tup AS dead, vacuum_count AS vacuums, analyze_count AS analyses FROM pg_stat_user_tables WHERE relname = '${table}'`,
      );
      return { dead: Number(r!.dead), vacuums: Number(r!.vacuums), analyses: Number(r!.analyses) };
    };
    /** A table of 100 rows, each updated `times` times (up to 100 x times dead row versions). */
    const churned = async (table: string, times: number) => {
      await q(`CREATE TABLE ${table} (id int PRIMARY KEY, v int NOT NULL)`);
      await q(`INSERT INTO ${table} SELECT g, 0 FROM generate_series(1, 100) g`);
      for (let i = 0; i < times; i++) await q(`UPDATE ${table} SET v = v + 1`);
    };

    it('vacuums and analyses a churned table, leaves a quiet one alone', async () => {
      await churned('care_churned', 10);
      await q('CREATE TABLE care_quiet (id int PRIMARY KEY)');
      await q('INSERT INTO care_quiet VALUES (1), (2)');
      await q('VACUUM ANALYZE care_quiet');
      // Past the threshold (50 + 20% of 100), whatever the updates' own pruning took back.
      expect((await stat('care_churned')).dead).toBeGreaterThan(70);
      const quietBefore = await stat('care_quiet');
      // 'on': whether or not this server runs autovacuum ('auto' on a server running it: below).
      const r = await care({ mode: 'on' }).runOnce();
      expect(r.skipped).toBeUndefined();
      expect(r.vacuumed).toContain('care_churned');
      expect(r.analysed).toContain('care_churned');
      expect(r.vacuumed).not.toContain('care_quiet');
      // Sizes are read for the tables a rule may act on, not for every table (on PGlite each one is
      // a walk of its files through the engine's file system).
      expect(r.sized).toContain('care_churned');
      expect(r.sized).not.toContain('care_quiet');
      expect(r.analysed).not.toContain('care_quiet');
      const after = await stat('care_churned');
      expect(after.dead).toBe(0);
      expect(after.vacuums).toBe(1);
      expect(after.analyses).toBe(1);
      expect(await stat('care_quiet')).toEqual(quietBefore);
      expect(lines.some((l) => l.msg === 'table care' && l.table === 'care_churned' && l.vacuum === true)).toBe(true);
      // Nothing left to do: the next round touches nothing.
      const again = await care({ mode: 'on' }).runOnce();
      expect([again.vacuumed, again.analysed]).toEqual([[], []]);
      expect(again.sized).not.toContain('care_churned');
    });

    it("'auto' cares unless an autovacuum launcher runs (PGlite never has one); 'off' does nothing", async () => {
      await churned('care_auto', 5);
      const launcher =
        engine === 'postgresql' &&
        (await q<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum launcher'`))[0]!.n !== '0';
      expect(await care({ mode: 'off' }).runOnce()).toMatchObject({ skipped: 'off', vacuumed: [], analysed: [] });
      expect((await stat('care_auto')).vacuums).toBe(0);
      const r = await care({ mode: 'auto' }).runOnce();
      if (launcher) expect(r).toMatchObject({ skipped: 'autovacuum', vacuumed: [] });
      else expect(r.vacuumed).toContain('care_auto');
    });

    it('analyses a large table once its changes pass its live rows, below the small-table threshold too', async () => {
      // 10 rows, 30 changes (inserts and two updates of each): past the large-table rule (10), under
      // autovacuum's (50 + 10%) and the vacuum's; maxVacuumBytes 1 makes every table large.
      await q('CREATE TABLE care_few (id int PRIMARY KEY, v int NOT NULL)');
      await q('INSERT INTO care_few SELECT g, 0 FROM generate_series(1, 10) g');
      for (let i = 0; i < 2; i++) await q('UPDATE care_few SET v = v + 1');
      const r = await care({ mode: 'on', maxVacuumBytes: 1 }).runOnce();
      expect(r.sized).toContain('care_few');
      expect(r.vacuumed).not.toContain('care_few');
      // PostgreSQL analyses it; PGlite leaves a large table alone (its analyse would hold every writer).
      if (engine === 'postgresql') {
        expect(r.analysed).toContain('care_few');
        expect((await stat('care_few')).analyses).toBe(1);
      } else expect(r.tooLarge).toContain('care_few');
    });

    if (engine === 'pglite')
      it('on PGlite (no checkpointer), a round checkpoints once enough WAL was written since the last checkpoint', async () => {
        const since = async () =>
          Number((await q<{ n: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), (pg_control_checkpoint()).redo_lsn)::bigint AS n'))[0]!.n);
        await q('CHECKPOINT');
        expect(await care({ mode: 'on', checkpointWalBytes: 1024 * 1024 }).runOnce()).not.toHaveProperty('checkpointed', true);
        await q(`CREATE TABLE care_wal AS SELECT g AS id, repeat('x', 500) AS v FROM generate_series(1, 10000) g`);
        expect(await since()).toBeGreaterThan(1024 * 1024);
        const r = await care({ mode: 'on', checkpointWalBytes: 1024 * 1024 }).runOnce();
        expect(r.checkpointed).toBe(true);
        expect(await since()).toBeLessThan(64 * 1024);
      });

    if (engine === 'pglite')
      it('on PGlite, a table over the size limit is left alone (its vacuum or analyse would hold every writer)', async () => {
        await churned('care_large', 5);
        const r = await care({ mode: 'on', maxVacuumBytes: 1 }).runOnce();
        expect(r.tooLarge).toContain('care_large');
        expect(r.vacuumed).not.toContain('care_large');
        expect(r.analysed).not.toContain('care_large');
        expect(await stat('care_large')).toMatchObject({ vacuums: 0, analyses: 0 });
      });
  });
}
