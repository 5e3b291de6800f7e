// One statement for a change that spans contexts. Each context contributes the part that touches
// its own tables (data-modifying CTEs, and the conditions its rules need); the flow that spans them
// composes the parts into one statement, which the database runs atomically in one round trip:
//
//   WITH <the CTEs of every part, in order>
//   SELECT cog_require(<check 0>, 'cog_check:0'), …, <outputs>
//
// A write on the hot path then costs one statement instead of an interactive transaction of a
// dozen (each a round trip and a pass through Prisma), and the contexts still own their tables:
// the SQL of a table is written only in its owner's module.
//
// Order and locks: the checks are evaluated in order, each running the CTEs it reads (a CTE runs
// when it is first read); the CTEs no check reads run after the checks. So the order of the parts
// is the order their rows are locked in (a write locks its stack row first, as every stack writer
// does). The first false check raises (cog_require, a migration's function) and the whole statement,
// every CTE of every part, is undone; runStatement then throws that check's error. Every CTE sees the
// snapshot the statement started with; one that must see another's effect reads its RETURNING.
import { Prisma } from '../../generated/prisma/client.ts';
import { retryTransient, type Database, type Db, type Sql, type Tx } from './index.ts';

export interface Cte {
  /** Unique in the statement (a part names its CTEs after its table: `stack_head`, `ledger_debit`). */
  name: string;
  body: Sql;
}

export interface Check {
  /** A boolean expression over the CTEs (`(SELECT count(*) FROM stack_head) = 1`). */
  holds: Sql;
  /** The error the caller gets when it does not hold (the statement changed nothing). */
  fail: () => Error;
}

export interface StatementPart {
  ctes?: readonly Cte[];
  checks?: readonly Check[];
  /** Named values the statement returns (`SELECT … AS name`). */
  outputs?: ReadonlyArray<{ name: string; expr: Sql }>;
  /**
   * Run once the statement succeeded (a relay nudge). `out` (the statement's outputs) is given when
   * the statement was its own transaction, so it has committed; inside a caller's transaction
   * (runStatement on a Tx) it is undefined: that transaction has not committed yet.
   */
  committed?: (out?: Record<string, unknown>) => void;
  /** Run when runStatement failed: the statement changed nothing. */
  undone?: () => void;
}

const CHECK = 'cog_check:';
const FAILED_CHECK = new RegExp(`${CHECK}(\\d+)`);
const NAME = /^[a-z_][a-z0-9_]*$/;

/** Several parts as one (a context's part made of its own and a lower context's). */
export function joinParts(...parts: ReadonlyArray<StatementPart | null | undefined>): StatementPart {
  const ps = parts.filter((p): p is StatementPart => !!p);
  return {
    ctes: ps.flatMap((p) => p.ctes ?? []),
    checks: ps.flatMap((p) => p.checks ?? []),
    outputs: ps.flatMap((p) => p.outputs ?? []),
    committed: (out) => {
      for (const p of ps) p.committed?.(out);
    },
    undone: () => {
      for (const p of ps) p.undone?.();
    },
  };
}

/** The composed statement (exported for EXPLAIN in tests). */
export function composeStatement(parts: readonly StatementPart[]): { sql: Sql; checks: Check[] } {
  const names = new Set<string>();
  const ctes: Sql[] = [];
  const checks: Check[] = [];
  const selects: Sql[] = [];
  for (const p of parts) {
    for (const c of p.ctes ?? []) {
      if (!NAME.test(c.name) || names.has(c.name)) throw new Error(`statement: CTE name ${JSON.stringify(c.name)} is invalid or used twice`);
      names.add(c.name);
      ctes.push(Prisma.sql`${Prisma.raw(c.name)} AS (${c.body})`);
    }
    for (const c of p.checks ?? []) {
      selects.push(Prisma.sql`cog_require(${c.holds}, ${Prisma.raw(`'${CHECK}${checks.length}'`)}) AS ${Prisma.raw(`c${checks.length}`)}`);
      checks.push(c);
    }
    for (const o of p.outputs ?? []) {
      if (!NAME.test(o.name) || names.has(o.name)) throw new Error(`statement: output name ${JSON.stringify(o.name)} is invalid or used twice`);
      names.add(o.name);
      selects.push(Prisma.sql`${o.expr} AS ${Prisma.raw(`"${o.name}"`)}`);
    }
  }
  const select = selects.length ? Prisma.join(selects) : Prisma.raw('1 AS one');
  return { sql: ctes.length ? Prisma.sql`WITH ${Prisma.join(ctes)} SELECT ${select}` : Prisma.sql`SELECT ${select}`, checks };
}

/** The index of the check a database error says failed (cog_require's message), if it is one. */
function failedCheck(e: unknown): number | undefined {
  const seen = new Set<unknown>();
  for (let x: unknown = e; x && typeof x === 'object' && !seen.has(x); x = (x as { cause?: unknown }).cause) {
    seen.add(x);
    for (const m of [(x as { message?: unknown }).message, JSON.stringify((x as { meta?: unknown }).meta ?? null)]) {
      const hit = typeof m === 'string' ? FAILED_CHECK.exec(m) : null;
      if (hit) return Number(hit[1]);
    }
  }
  return undefined;
}

/**
 * Runs the parts as one statement: on the database's own driver (autocommit: the statement is its
 * own transaction, run again after a deadlock as a transaction is: retryTransient), or inside a
 * Prisma transaction `tx`. Throws the error of the first check that does not hold; returns the
 * outputs.
 */
export async function runStatement(on: Database | Tx, parts: readonly StatementPart[]): Promise<Record<string, unknown>> {
  let composed: ReturnType<typeof composeStatement>;
  try {
    composed = composeStatement(parts);
  } catch (e) {
    for (const p of parts) p.undone?.();
    throw e;
  }
  const { sql, checks } = composed;
  try {
    const own = 'driver' in on;
    const out = own
      ? ((await retryTransient(() => queryPrepared(on, sql)))[0] ?? {})
      : ((await on.$queryRawUnsafe<Record<string, unknown>[]>(sql.text, ...sql.values))[0] ?? {});
    for (const p of parts) p.committed?.(own ? out : undefined);
    return out;
  } catch (e) {
    for (const p of parts) p.undone?.();
    const failed = failedCheck(e);
    if (failed !== undefined && checks[failed]) throw checks[failed]!.fail();
    throw e;
  }
}

/** A value read by one statement of several reads (readStatement): its SQL expression and how to parse what it returns. */
export interface ReadPart<T> {
  expr: Sql;
  parse: (value: unknown) => T;
}

/**
 * Several reads (each a scalar subquery, typically json) in one statement: one round trip, through
 * the driver (prepared on PostgreSQL), or through a Prisma client or transaction when given one.
 */
export async function readStatement<R extends Record<string, ReadPart<unknown>>>(
  db: Database | Db | Tx,
  reads: R,
): Promise<{ [K in keyof R]: R[K] extends ReadPart<infer T> ? T : never }> {
  const keys = Object.keys(reads);
  const values = await readValues(
    db,
    keys.map((k) => reads[k]!.expr),
  );
  const out: Record<string, unknown> = {};
  keys.forEach((k, i) => {
    out[k] = reads[k]!.parse(values[i]);
  });
  return out as never;
}

const NAME_OF_TABLE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The next value of a serial column's sequence, read on its own through the driver (prepared): for
 * an id that carries the number, made before the statement that inserts the row. `table` and
 * `column` are the caller's constants.
 */
export async function nextSerial(db: Database, table: string, column: string): Promise<number> {
  if (!NAME_OF_TABLE.test(table) || !NAME_OF_TABLE.test(column)) throw new Error(`nextSerial: ${table}.${column} is not a plain name`);
  const rows = await db.driver.query<{ v: string }>(`SELECT nextval(pg_get_serial_sequence('"${table}"', '${column}'))::text AS v`, [], { prepare: true });
  return Number(rows[0]!.v);
}

/**
 * A composed statement through the driver as a prepared statement (parsed and planned once a
 * connection): for the statements that run many times a second, where Prisma's engine cost more
 * than the query.
 */
export function queryPrepared<R = Record<string, unknown>>(db: Database, q: Sql): Promise<R[]> {
  return db.driver.query<R>(q.text, q.values, { prepare: true });
}

/** The values of several scalar subqueries, read by one statement (null for none). */
async function readValues(db: Database | Db | Tx, exprs: readonly Sql[]): Promise<unknown[]> {
  const q = Prisma.sql`SELECT ${Prisma.join(exprs.map((e, i) => Prisma.sql`(${e}) AS ${Prisma.raw(`r${i}`)}`))}`;
  const [row] = 'driver' in db ? await queryPrepared(db, q) : await db.$queryRawUnsafe<Record<string, unknown>[]>(q.text, ...q.values);
  return exprs.map((_, i) => row?.[`r${i}`] ?? null);
}

/** A column of jsonRows: its name in the objects read, its SQL expression, and `iso` for a timestamp. */
export type JsonColumn<T> = readonly [name: keyof T & string, expr: Sql, kind?: 'iso'];

/**
 * Rows sent as one json value of arrays (json_agg of `row`, a json_build_array: no key repeated in
 * every row, the least text to build and to parse; PGlite builds json objects and formats dates
 * slowly), read back as objects with the columns' names. An `iso` column (a timestamp) travels as
 * epoch milliseconds and is read as the ISO 8601 text `Date.toISOString` gives (null stays null).
 */
export function jsonRows<T>(columns: ReadonlyArray<JsonColumn<T>>): { row: Sql; parse: (value: unknown) => T[] } {
  const exprs = columns.map(([, expr, kind]) => (kind === 'iso' ? Prisma.sql`round(date_part('epoch', ${expr}) * 1000)` : expr));
  const names = columns.map(([name]) => name);
  const iso = columns.map(([, , kind]) => kind === 'iso');
  return {
    row: Prisma.sql`json_build_array(${Prisma.join(exprs)})`,
    parse: (value) => {
      const rows = (jsonValue(value) as unknown[][] | null) ?? [];
      return rows.map((r) => {
        const o: Record<string, unknown> = {};
        for (let i = 0; i < names.length; i++) {
          const v = r[i];
          o[names[i]!] = iso[i] && v !== null ? new Date(v as number).toISOString() : v;
        }
        return o as T;
      });
    },
  };
}

/** Reads queued for the next batch of a batchedReads, with their callers. */
type QueuedRead = { part: ReadPart<unknown>; resolve: (v: unknown) => void; reject: (e: unknown) => void };

/**
 * A read function whose reads, issued in the same turn of the event loop (the batch functions of
 * DataLoaders dispatched together, as a GraphQL request's parallel subgraph fetches dispatch
 * theirs), run as one statement of several reads (readStatement): one round trip for all of them.
 * Each read is still its own subquery, computed for its caller. A batch the database refuses is
 * run again read by read, so a read that fails fails only its own caller.
 */
export function batchedReads(db: Database): <T>(part: ReadPart<T>) => Promise<T> {
  let queue: QueuedRead[] | null = null;
  const run = async (batch: QueuedRead[]) => {
    let values: unknown[];
    try {
      values = await readValues(
        db,
        batch.map((r) => r.part.expr),
      );
    } catch (e) {
      if (batch.length === 1) return batch[0]!.reject(e);
      for (const r of batch) void run([r]);
      return;
    }
    batch.forEach((r, i) => {
      try {
        r.resolve(r.part.parse(values[i]));
      } catch (e) {
        r.reject(e);
      }
    });
  };
  return <T>(part: ReadPart<T>) =>
    new Promise<T>((resolve, reject) => {
      if (!queue) {
        const batch: QueuedRead[] = (queue = []);
        // As DataLoader schedules its batches: after the promise jobs of this turn, then a tick,
        // so the loaders dispatched in this turn all queue their reads first.
        void Promise.resolve().then(() =>
          process.nextTick(() => {
            queue = null;
            void run(batch);
          }),
        );
      }
      queue.push({ part: part as ReadPart<unknown>, resolve: resolve as (v: unknown) => void, reject });
    });
}

/**
 * A `$n`-numbered SQL text with its parameters, as a fragment that composes (a context's statement
 * text reused as a CTE body: its numbers are renumbered in the whole statement).
 */
export function numberedSql(text: string, params: readonly unknown[]): Sql {
  const strings: string[] = [];
  const values: unknown[] = [];
  let last = 0;
  for (const m of text.matchAll(/\$(\d+)/g)) {
    const n = Number(m[1]);
    if (!(n >= 1 && n <= params.length)) throw new Error(`numberedSql: $${n} has no parameter`);
    strings.push(text.slice(last, m.index));
    values.push(params[n - 1]);
    last = m.index + m[0].length;
  }
  strings.push(text.slice(last));
  return new Prisma.Sql(strings, values);
}

/** A json value as the drivers return it (PGlite parses json, node-postgres too; a text column is parsed here). */
export function jsonValue(v: unknown): unknown {
  return typeof v === 'string' ? JSON.parse(v) : v;
}
