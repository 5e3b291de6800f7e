// Table care where nothing else does it: PGlite has no autovacuum (no background workers), and a
// PostgreSQL server may run with it off. Without it the tables the platform updates or deletes from
// all day (a stack's head, a sleeve's drift, a balance, the event and chain outboxes) keep every
// dead row version: a 32-row table grew to 2.4 MB and the event outbox to 43 MB in 150 s of writes.
// A prepared statement's generic plan, made in the first seconds when such a table was a page,
// scanned it whole on every write for as long as the process ran: a cached plan is made again only
// when the table's statistics change, which is what VACUUM and ANALYZE do.
//
// So each round does what autovacuum would, with its default thresholds: a table with more dead row
// versions than 50 + 20% of its live rows is vacuumed, one with more changes since its last analyse
// than 50 + 10% of its live rows is analysed (a table over maxVacuumBytes only once it doubled).
// One table at a time, each its own statement, so the writers get the database between them (PGlite
// has one connection); SKIP_LOCKED, so a table another vacuum holds (another process of a
// distributed cluster, an operator's) is left to it. On PGlite a table over maxVacuumBytes is left
// alone: vacuuming or analysing it would hold every writer for a scan of it and its indexes, and the
// small tables that churn are the ones whose bloat costs every write. On PGlite a round also
// checkpoints once enough WAL was written since the last checkpoint (no checkpointer runs there).
//
// mode 'auto' (the default) cares on PGlite, and on PostgreSQL only while no autovacuum launcher
// runs; 'on' always; 'off' never. Which processes of a cluster start it: bin/services.ts (runsTableCare).
import type { Logger } from '../log.ts';
import type { Database } from './index.ts';

export type TableCareMode = 'auto' | 'on' | 'off';

export interface TableCareOptions {
  mode?: TableCareMode;
  /** Between rounds (ms). */
  everyMs?: number;
  /**
   * Tables larger than this (bytes, indexes included; default 4 MB on PGlite, 32 MB on PostgreSQL)
   * are analysed only once they doubled, and on PGlite left alone (a vacuum or analyse of them would
   * hold its one connection for a scan of the table).
   */
  maxVacuumBytes?: number;
  /**
   * PGlite: a round checkpoints once this much WAL was written since the last checkpoint (bytes; 0:
   * never; default the database's max_wal_size, 1 GB, where PostgreSQL's checkpointer would).
   */
  checkpointWalBytes?: number;
}

export interface TableCareRound {
  /** Why nothing was done, when nothing was. */
  skipped?: 'off' | 'autovacuum';
  vacuumed: string[];
  analysed: string[];
  /** Tables left alone for their size (PGlite). */
  tooLarge: string[];
  /** Tables whose size the round read: only those a rule may act on, whatever their size. */
  sized: string[];
  /** PGlite: the round made a checkpoint. */
  checkpointed?: boolean;
  ms: number;
}

export interface TableCare {
  /** One round now (the timer's rounds wait for it). */
  runOnce(): Promise<TableCareRound>;
  close(): Promise<void>;
}

/** autovacuum's defaults (autovacuum_vacuum_threshold, _scale_factor; autovacuum_analyze_*). */
const VACUUM_BASE = 50;
const VACUUM_SCALE = 0.2;
const ANALYZE_BASE = 50;
const ANALYZE_SCALE = 0.1;

type TableStat = { name: string; live: number; dead: number; mods: number; bytes: number };

const dueForVacuum = (t: TableStat) => t.dead > VACUUM_BASE + VACUUM_SCALE * t.live;
/**
 * Changes since its last analyse above which a table is analysed: autovacuum's threshold, and for a
 * large table its live rows (analysed once it has doubled).
 */
const analyseAbove = (t: TableStat, large: boolean) => (large ? t.live : ANALYZE_BASE + ANALYZE_SCALE * t.live);

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

export function startTableCare(db: Database, log: Logger, opts: TableCareOptions = {}): TableCare {
  const mode = opts.mode ?? 'auto';
  const everyMs = opts.everyMs ?? 10_000;
  // PGlite: small, so a round holds its one connection for a few milliseconds a table (with 32 MB,
  // the vacuums and analyses of the ledger's chain intents as they grew put the embedded perceive
  // bench's p99 at 164 ms and remember's at 270, from 115 and 145).
  const maxVacuumBytes = opts.maxVacuumBytes ?? (db.kind === 'pglite' ? 4 : 32) * 1024 * 1024;
  let checkpointWalBytes = opts.checkpointWalBytes;
  const q = <R>(text: string) => db.driver.query<R>(text);
  let closed = false;
  let running: Promise<TableCareRound> | undefined;
  let told = false;

  const autovacuumRuns = async () =>
    db.kind === 'postgres' &&
    !!(await q<{ on: boolean }>(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'autovacuum launcher') AS on`))[0]?.on;

  // The tables a rule may act on, whatever their size, with their sizes (bytes).
  const dueTables = async (): Promise<TableStat[]> => {
    // A backend's counts reach the shared statistics when it next goes idle; PGlite's single backend
    // only when asked (PostgreSQL 15 and later; on an older server the others' counts still arrive).
    await q('SELECT pg_stat_force_next_flush()').catch(() => {});
    const rows = await q<{ name: string; live: string | number; dead: string | number; mods: string | number }>(
      `SELECT relname AS name, n_live_tup AS live, n_dead_tup AS dead, n_mod_since_analyze AS mods
       FROM pg_stat_user_tables WHERE schemaname = current_schema() ORDER BY relname`,
    );
    const all = rows.map((r) => ({ name: r.name, live: Number(r.live), dead: Number(r.dead), mods: Number(r.mods), bytes: 0 }));
    // A size only where a rule may act on it: pg_total_relation_size stats every file of a table and
    // its indexes, and on PGlite each stat is a path lookup through its file system in JavaScript
    // (the 26 tables' sizes 20-45 ms a round, 100-180 ms on a cold cache, the one connection held).
    // A table under both analyse thresholds (as a small table and as a large one) and the vacuum's
    // is left alone whatever its size.
    const due = all.filter((t) => dueForVacuum(t) || t.mods > Math.min(analyseAbove(t, false), analyseAbove(t, true)));
    if (due.length) {
      const sizes = await db.driver.query<{ name: string; bytes: string | number }>(
        `SELECT relname AS name, pg_total_relation_size(relid) AS bytes FROM pg_stat_user_tables
         WHERE schemaname = current_schema() AND relname = ANY($1::text[])`,
        [due.map((t) => t.name)],
      );
      const byName = new Map(sizes.map((s) => [s.name, Number(s.bytes)]));
      for (const t of due) t.bytes = byName.get(t.name) ?? 0;
    }
    return due;
  };

  const round = async (): Promise<TableCareRound> => {
    const t0 = performance.now();
    const out: TableCareRound = { vacuumed: [], analysed: [], tooLarge: [], sized: [], ms: 0 };
    const done = () => ({ ...out, ms: Math.round(performance.now() - t0) });
    if (mode === 'off') return { ...done(), skipped: 'off' };
    if (mode === 'auto' && (await autovacuumRuns())) return { ...done(), skipped: 'autovacuum' };
    if (!told) {
      told = true;
      log.info(
        { database: db.kind, everyMs },
        db.kind === 'pglite'
          ? 'table care: vacuuming and analysing the tables as autovacuum would (PGlite has none)'
          : mode === 'on'
            ? 'table care: the platform vacuums and analyses its tables (COG_TABLE_CARE=on)'
            : 'table care: no autovacuum runs on this server; the platform vacuums and analyses its tables (COG_TABLE_CARE=off to leave it to you)',
      );
    }
    const due = await dueTables();
    out.sized = due.map((t) => t.name);
    for (const t of due) {
      if (closed) break;
      const large = t.bytes > maxVacuumBytes;
      const vacuum = dueForVacuum(t);
      // A large table is analysed once it has doubled since its last analyse: the tables that grow
      // with every write (the memory nodes, the ledger) crossed the 10% mark every round under load,
      // and each analyse of them (0.3-0.6 s at 150-200 MB) read pages the writes' indexes then had
      // to read back; the plans that go stale are the small tables'.
      const analyse = t.mods > analyseAbove(t, large);
      if (!vacuum && !analyse) continue;
      // On PGlite a large table is left alone: its vacuum or analyse would hold every writer.
      if (db.kind === 'pglite' && large) {
        out.tooLarge.push(t.name);
        continue;
      }
      const t1 = performance.now();
      try {
        // VACUUM also brings the statistics the planner reads up to date (pages, rows), which is what
        // makes a cached plan be made again; ANALYZE with it when the rows changed enough.
        await q(`${vacuum ? `VACUUM (SKIP_LOCKED${analyse ? ', ANALYZE' : ''})` : 'ANALYZE (SKIP_LOCKED)'} ${quoteIdent(t.name)}`);
      } catch (e) {
        log.warn({ table: t.name, err: (e as Error).message }, 'table care: vacuum or analyse failed');
        continue;
      }
      if (vacuum) out.vacuumed.push(t.name);
      if (analyse) out.analysed.push(t.name);
      log.debug({ table: t.name, vacuum, analyse, dead: t.dead, live: t.live, ms: Math.round(performance.now() - t1) }, 'table care');
    }
    // PGlite is a standalone backend: no checkpointer, and a standalone backend never checkpoints on
    // the WAL it writes, only when it shuts down. The WAL then grows for as long as the platform runs
    // (1.2 GB of the data directory's 2 GB after 5 minutes of the embedded perceive load) and a
    // restart replays all of it. So past checkpointWalBytes since the last checkpoint (max_wal_size
    // unless set), one here, as the checkpointer would. Not more often: after a checkpoint every page
    // first written again goes into the WAL whole, and at 256 MB the embedded remember bench, measured
    // after the perceive one, lost a fifth of its rate (902 / 791 req/s against 1,083 / 1,106).
    if (db.kind === 'pglite' && checkpointWalBytes === undefined) {
      const [m] = await q<{ mb: string | number }>(`SELECT setting AS mb FROM pg_settings WHERE name = 'max_wal_size'`);
      checkpointWalBytes = Number(m?.mb ?? 1024) * 1024 * 1024;
    }
    if (db.kind === 'pglite' && checkpointWalBytes! > 0 && !closed) {
      const [w] = await q<{ since: string | number }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), (pg_control_checkpoint()).redo_lsn)::bigint AS since');
      if (Number(w?.since ?? 0) > checkpointWalBytes!) {
        const t1 = performance.now();
        await q('CHECKPOINT');
        out.checkpointed = true;
        log.debug({ walBytes: Number(w!.since), ms: Math.round(performance.now() - t1) }, 'table care: checkpoint');
      }
    }
    const r = done();
    if (r.ms > 1000) log.warn({ ms: r.ms, vacuumed: r.vacuumed, analysed: r.analysed }, 'table care: slow round');
    return r;
  };

  const runOnce = (): Promise<TableCareRound> => {
    running ??= round().finally(() => {
      running = undefined;
    });
    return running;
  };

  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (closed || mode === 'off') return;
    timer = setTimeout(() => {
      runOnce()
        .catch((e: unknown) => log.warn({ err: (e as Error).message }, 'table care: round failed, will retry'))
        .finally(schedule);
    }, everyMs);
    timer.unref();
  };
  schedule();

  return {
    runOnce,
    async close() {
      closed = true;
      clearTimeout(timer);
      await running?.catch(() => {});
    },
  };
}
