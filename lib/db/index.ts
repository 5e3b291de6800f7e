// The database: Prisma 7 over a driver adapter. PGlite (embedded PostgreSQL in WASM) under the
// data dir by default; PostgreSQL through @prisma/adapter-pg when a URL is given. Each driver is
// loaded only when chosen: an embedded start does not load pg, one on PostgreSQL not PGlite.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Prisma, PrismaClient } from '../../generated/prisma/client.ts';
import type { PGlite } from '@electric-sql/pglite';
import type { PGliteThread } from './pglite-thread.ts';
import { migrate, type SqlDriver } from './migrate.ts';
import { copyTemplate, ensureTemplate, freshCluster } from './template.ts';
import { transientTransactionError } from '../errors.ts';
import { timeSlicer } from '../time-slice.ts';
import { inDbSpan, tracingOn } from '../tracing.ts';

export type { PrismaClient };
/**
 * A raw SQL statement with its parameters (`sql\`SELECT … ${x}\``), for queries a test also
 * EXPLAINs (db.$queryRaw(sql\`EXPLAIN ${q}\`)) so the statement it checks is the one that runs.
 */
export const sql = Prisma.sql;
/** A CTE or column name spliced into a `sql` fragment (checked: letters, digits, underscores). */
export function sqlIdent(name: string): Sql {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`sqlIdent: ${JSON.stringify(name)} is not a plain identifier`);
  return Prisma.raw(name);
}
export type Sql = Prisma.Sql;
/** A module's own constant SQL text (never a value a client sent) spliced into a `sql` fragment. */
export const sqlText = (text: string): Sql => Prisma.raw(text);
export type Db = PrismaClient;
/** The client handed to a transaction callback. */
export type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/** Longest PGlite in this thread may hold the event loop before a call into it gives the loop a turn (ms). */
const TURN_MS = 4;

export interface Database {
  prisma: PrismaClient;
  /** Raw driver, for the migrator and for tests that count queries. */
  driver: SqlDriver;
  kind: 'pglite' | 'postgres';
  /** Number of SQL statements sent through Prisma since open. */
  queryCount(): number;
  /** Number of SQL statements sent since open, through Prisma or the driver (DataLoader tests count these). */
  statementCount(): number;
  /** PostgreSQL pool occupancy (metrics); undefined on PGlite, which has one connection. */
  pool?(): { total: number; idle: number; waiting: number; max: number };
  close(): Promise<void>;
}

/**
 * PGlite's options for `shared_buffers` of `mb` MB, given as a start parameter (the cluster's own
 * postgresql.conf is left as it is); none when `mb` is unset.
 */
export function pgliteOptions(pglite: { defaultStartParams: readonly string[] }, mb?: number): { startParams?: string[] } {
  return mb ? { startParams: [...pglite.defaultStartParams, '-c', `shared_buffers=${mb}MB`] } : {};
}

// PGlite's engine (9 MB of WebAssembly) compiled ahead of openDatabase. PGlite compiles it when
// the database opens, on V8's background threads while the main thread waits (70-100 ms idle in a
// restart); begun as a start begins (bin/cog.ts), the compile runs beside the modules' loading.
let pgliteModule: Promise<WebAssembly.Module | undefined> | undefined;

/** Begins compiling PGlite's engine for the next openDatabase of this process (once; a failure leaves it to PGlite). */
export function precompilePglite(): Promise<WebAssembly.Module | undefined> {
  return (pgliteModule ??= (async () => {
    const dist = path.dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
    return WebAssembly.compile(await fs.promises.readFile(path.join(dist, 'pglite.wasm')));
  })().catch(() => undefined));
}

/**
 * Opens the platform's database (migrated first). `migrated: true` skips the migrator: a second,
 * smaller pool of a process whose main pool already migrated (a background loop that must not
 * queue behind request traffic for a connection).
 */
export async function openDatabase(opts: {
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
  /** PGlite's shared_buffers in MB (its data dir's own setting when unset). */
  sharedBuffersMb?: number;
  /** PGlite's engine on a worker thread (true), or in this one (false, the default: docs/decisions.md). */
  pgliteThread?: boolean;
  inMemory?: boolean;
  migrated?: boolean;
}): Promise<Database> {
  let queries = 0;
  let driverStatements = 0;
  if (opts.databaseUrl) {
    const [{ default: pg }, { PrismaPg }] = await Promise.all([import('pg'), import('@prisma/adapter-pg')]);
    // JIT off (an `options` in the URL still wins): every statement here is short, and one whose
    // estimate was off (statistics from before a mass claim of sleeve leases) passed jit_above_cost
    // and spent 300-800 ms compiling, every round (docs/decisions.md, "No JIT").
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10, options: '-c jit=off' });
    pool.on('error', () => {}); // an idle client lost its server: the pool replaces it
    const driver: SqlDriver = {
      exec: async (sql) => {
        driverStatements++;
        await pool.query(sql);
      },
      query: async (sql, params, opts) => {
        driverStatements++;
        try {
          return (
            await (opts?.prepare ? pool.query({ name: preparedName(sql), text: sql, values: params as unknown[] }) : pool.query(sql, params as unknown[]))
          ).rows;
        } catch (e) {
          throw fromDatabase(e);
        }
      },
    };
    // Migrate on one connection so BEGIN/COMMIT and the advisory lock share a session.
    if (!opts.migrated) {
      const client = await pool.connect();
      try {
        await migrate({ exec: async (s) => void (await client.query(s)), query: async (s, p) => (await client.query(s, p as unknown[])).rows }, { lock: true });
      } finally {
        client.release();
      }
    }
    const prisma = new PrismaClient({ adapter: new PrismaPg(pool) as never, log: [{ emit: 'event', level: 'query' }] });
    (prisma as unknown as { $on(e: 'query', cb: () => void): void }).$on('query', () => void queries++);
    retryTransientTransactions(prisma);
    const max = opts.poolSize ?? 10;
    const poolStats = () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max });
    return {
      prisma,
      driver,
      kind: 'postgres',
      queryCount: () => queries,
      statementCount: () => queries + driverStatements,
      pool: poolStats,
      close: async () => {
        await prisma.$disconnect();
        await pool.end();
      },
    };
  }
  let dir = 'memory://';
  if (!opts.inMemory) {
    dir = path.join(opts.dataDir, 'db');
    fs.mkdirSync(dir, { recursive: true });
    // A new data dir starts from a copy of the migrated template (lib/db/template.ts): no initdb,
    // no migrations to run. `cog generate` makes it; when the migrations changed since, it is made
    // now (what initdb and the migrations would cost here anyway), so the next new data dir is
    // quick too. When it cannot be made (a read-only checkout), PGlite creates the cluster here.
    if (freshCluster(dir) && !copyTemplate(dir)) {
      try {
        await ensureTemplate();
        copyTemplate(dir);
      } catch {
        // initdb and the migrations below, as without a template
      }
    }
  }
  const [{ PGlite }, { PrismaPGlite }, { preparedQueries }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('pglite-prisma-adapter'),
    import('./pglite-prepared.ts'),
  ]);
  let lite: PGlite | PGliteThread;
  if (opts.pgliteThread) {
    // The engine on its own thread (lib/db/pglite-thread.ts): this thread keeps PGlite's protocol
    // work and hands each batch of messages over; every call then waits for an answer as it would
    // for a socket, so the event loop turns between them by itself.
    const { PGliteThread } = await import('./pglite-thread.ts');
    lite = await PGliteThread.open(dir, pgliteOptions(PGlite, opts.sharedBuffersMb));
  } else {
    const compiled = await pgliteModule;
    const inThread = await PGlite.create(dir, { ...pgliteOptions(PGlite, opts.sharedBuffersMb), ...(compiled ? { pgliteWasmModule: compiled } : {}) });
    // PGlite in this thread never waits on I/O: a chain of statements (a transaction, a pass's
    // queries, a group commit) resolves as microtasks and held the event loop until it ended, so
    // requests arriving meanwhile were not even read (stalls of 150-670 ms under the perceive
    // bench, which set its p99). A call into the engine more than TURN_MS after the loop's last turn
    // first gives it one, as a socket round trip would. A turn before every call cut the p99 as much
    // but cost up to a fifth of the rate (smaller group commits); bench/perceive.ts A/B on this
    // machine: p99 263-432 ms without, 138-181 ms at 10 ms, 109-133 ms at 4 ms (docs/decisions.md).
    const execProtocol = inThread.execProtocol.bind(inThread);
    const turn = timeSlicer(TURN_MS);
    inThread.execProtocol = async (message, options) => {
      await turn();
      return execProtocol(message, options);
    };
    lite = inThread;
  }
  // The driver's `prepare` statements run as named prepared statements (parsed and planned once).
  const prepared = preparedQueries(lite);
  const untracedDriver: SqlDriver = {
    exec: async (sql) => {
      driverStatements++;
      await lite.exec(sql);
    },
    query: async (sql, params, opts) => {
      driverStatements++;
      if (opts?.prepare) return (await prepared(sql, params ?? [])) as never;
      return (await lite.query(sql, params as unknown[])).rows as never;
    },
  };
  // With tracing on, each statement is a span of the request that ran it (as pg's are); off, the
  // driver is left as it is. bin/cog.mjs starts tracing before the stores open.
  const driver: SqlDriver = tracingOn()
    ? {
        exec: (sql) => inDbSpan(sql, () => untracedDriver.exec(sql)),
        query: (sql, params, opts) => inDbSpan(sql, () => untracedDriver.query(sql, params, opts)),
      }
    : untracedDriver;
  await migrate(driver);
  // The adapter uses query, exec and transaction, which the thread's client offers as PGlite does.
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(lite as PGlite) as never, log: [{ emit: 'event', level: 'query' }] });
  (prisma as unknown as { $on(e: 'query', cb: () => void): void }).$on('query', () => void queries++);
  return {
    prisma,
    driver,
    kind: 'pglite',
    queryCount: () => queries,
    statementCount: () => queries + driverStatements,
    close: async () => {
      await prisma.$disconnect();
      await lite.close();
    },
  };
}

/**
 * Marks an error of the driver as the database's (errors.ts: a refused or broken connection is a
 * 503 only when it is the database's; through Prisma its clientVersion says so).
 */
function fromDatabase(e: unknown): unknown {
  if (e && typeof e === 'object' && !Object.hasOwn(e, 'fromDatabase')) Object.defineProperty(e, 'fromDatabase', { value: true });
  return e;
}

const preparedNames = new Map<string, string>();
/** The name a prepared statement goes by on every connection: a digest of its text (the same text, the same name). */
function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (!name) {
    if (preparedNames.size >= 1_000) preparedNames.clear();
    preparedNames.set(text, (name = `cog_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`));
  }
  return name;
}

/** Attempts of an interactive transaction that keeps failing transiently (see transientTransactionError). */
export const TX_ATTEMPTS = 4;
let retried = 0;
/** Transactions run again after a transient failure since the process started (tests read it). */
export const transactionRetries = () => retried;

/**
 * Runs `run` (a transaction: interactive, or one statement) again, from the start, when PostgreSQL
 * aborted it for a deadlock or a serialization failure, or had no connection slot free; up to
 * TX_ATTEMPTS tries, with a short random pause so the two do not collide again.
 */
export async function retryTransient<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (e) {
      if (attempt >= TX_ATTEMPTS || !transientTransactionError(e)) throw e;
      retried++;
      await new Promise((r) => setTimeout(r, 10 * attempt + Math.random() * 40 * attempt));
    }
  }
}

/**
 * Runs an interactive transaction again, from the start, when PostgreSQL aborted it for a deadlock
 * or a serialization failure, or had no connection slot free: under load two transactions that
 * lock the same rows in different orders are normal, and the client should not see a 503 for
 * them. Up to TX_ATTEMPTS tries, with a short random pause (so the two do not collide again).
 * Everything a transaction callback does to the database is rolled back before it runs again;
 * the callbacks keep what they do outside it idempotent (a content-addressed put, in-memory state
 * updated only after commit). PGlite runs one transaction at a time and needs none of this.
 */
function retryTransientTransactions(prisma: PrismaClient): void {
  const original = prisma.$transaction.bind(prisma) as (arg: unknown, opts?: unknown) => Promise<unknown>;
  const retrying = async (arg: unknown, opts?: unknown) => {
    if (typeof arg !== 'function') return original(arg, opts); // a batch of queries: one statement set, Prisma runs it
    return retryTransient(() => original(arg, opts));
  };
  Object.defineProperty(prisma, '$transaction', { value: retrying, configurable: true, writable: true });
}
