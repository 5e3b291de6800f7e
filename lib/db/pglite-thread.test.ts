// PGlite with its engine on a worker thread answers as PGlite in this thread does, frees the event
// loop while a statement runs, moves answers and batches larger than its shared buffer, and neither
// keeps an idle process alive nor lets one exit before its answer.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite, protocol, type Results } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PGliteThread } from './pglite-thread.ts';
import { preparedQueries } from './pglite-prepared.ts';
import { openDatabase } from './index.ts';
import { copyTemplate, ensureTemplate } from './template.ts';

const dirs: string[] = [];
/** A data dir holding a copy of the migrated template (no initdb). */
async function clusterDir(): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-pglite-thread-'));
  dirs.push(dir);
  await ensureTemplate();
  expect(copyTemplate(dir)).toBe(true);
  return dir;
}

let lite: PGliteThread;
beforeAll(async () => {
  lite = await PGliteThread.open(await clusterDir(), { startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'] });
  await lite.exec('CREATE TABLE t (id serial PRIMARY KEY, name text, doc jsonb, bin bytea, at timestamptz, tags text[], n numeric)');
}, 60_000);
afterAll(async () => {
  await lite?.close();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** The rows without PGlite's per-call fields that differ by design (none expected: the same parsers). */
const rowsOf = (r: Results<unknown>) => ({ rows: r.rows, fields: r.fields.map((f) => [f.name, f.dataTypeID]), affectedRows: r.affectedRows });

describe('PGliteThread', () => {
  it('answers as PGlite in this thread: parameters of each type serialised by the server’s types, rows parsed alike, array rows and custom parsers', async () => {
    const at = new Date('2026-12-07T01:02:03.456Z');
    const bin = new Uint8Array([0, 1, 2, 254, 255]);
    const values = ['ä "quoted"', { a: [1, 2], b: null }, bin, at, ['x', 'y,z', null], '12.50'];
    const insert = 'INSERT INTO t (name, doc, bin, at, tags, n) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id';
    const inserted = await lite.query<{ id: number }>(insert, values);
    expect(inserted.affectedRows).toBe(1);
    const id = inserted.rows[0]!.id;
    const read = await lite.query<Record<string, unknown>>('SELECT name, doc, bin, at, tags, n FROM t WHERE id = $1', [id]);
    expect(read.rows).toEqual([{ name: 'ä "quoted"', doc: { a: [1, 2], b: null }, bin, at, tags: ['x', 'y,z', null], n: '12.50' }]);

    // The same statements on PGlite in this thread, over a copy of the same template.
    const local = await PGlite.create(await clusterDir());
    try {
      await local.exec('CREATE TABLE t (id serial PRIMARY KEY, name text, doc jsonb, bin bytea, at timestamptz, tags text[], n numeric)');
      await local.query(insert, values);
      const q = 'SELECT name, doc, bin, at, tags, n, $1::int + 1 AS next FROM t ORDER BY id LIMIT 1';
      const mine = await lite.query(q, [41]);
      expect(rowsOf(mine)).toEqual(rowsOf(await local.query(q, [41])));
      const opts = { rowMode: 'array' as const, parsers: { [1184]: (x: string) => `at ${x}` } };
      expect(rowsOf(await lite.query(q, [1], opts))).toEqual(rowsOf(await local.query(q, [1], opts)));
      const script = 'SELECT 1 AS a; SELECT $$two$$ AS b, 2.5::float8 AS c';
      expect((await lite.exec(script)).map(rowsOf)).toEqual((await local.exec(script)).map(rowsOf));
    } finally {
      await local.close();
    }
  });

  it('a failed statement throws the server’s error with the statement attached, and the next one runs', async () => {
    const e = await lite.query('SELECT * FROM missing WHERE x = $1', [1]).catch((x) => x);
    expect(e).toBeInstanceOf(protocol.messages.DatabaseError);
    expect(e).toMatchObject({ code: '42P01', query: 'SELECT * FROM missing WHERE x = $1', params: [1] });
    const syntax = await lite.exec('SELEC 1').catch((x) => x);
    expect(syntax).toMatchObject({ code: '42601' });
    expect((await lite.query<{ v: number }>('SELECT $1::int AS v', [7])).rows).toEqual([{ v: 7 }]);
  });

  it('transactions commit together or not at all, one at a time, with the other statements waiting', async () => {
    await lite.exec('CREATE TABLE tx (v int)');
    await lite.transaction(async (tx) => {
      await tx.query('INSERT INTO tx VALUES ($1)', [1]);
      await tx.query('INSERT INTO tx VALUES ($1)', [2]);
    });
    await expect(
      lite.transaction(async (tx) => {
        await tx.query('INSERT INTO tx VALUES ($1)', [3]);
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    await lite.transaction(async (tx) => {
      await tx.query('INSERT INTO tx VALUES ($1)', [4]);
      await tx.rollback();
    });
    // A failed statement aborts its transaction: the callback's error, nothing written.
    await expect(
      lite.transaction(async (tx) => {
        await tx.query('INSERT INTO tx VALUES ($1)', [5]);
        await tx.query('INSERT INTO tx VALUES ($1)', ['not a number']);
      }),
    ).rejects.toMatchObject({ code: '22P02' });
    // A statement sent while a transaction runs waits for it: it sees the committed rows.
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const running = lite.transaction(async (tx) => {
      await tx.query('INSERT INTO tx VALUES ($1)', [6]);
      order.push('tx wrote');
      await held;
      order.push('tx ends');
    });
    const outside = lite.query<{ n: number }>('SELECT count(*)::int AS n FROM tx').then((r) => {
      order.push('read');
      return r.rows[0]!.n;
    });
    await new Promise((r) => setTimeout(r, 50));
    release();
    await running;
    expect(await outside).toBe(3);
    expect(order).toEqual(['tx wrote', 'tx ends', 'read']);
    expect((await lite.query<{ v: number }>('SELECT v FROM tx ORDER BY v')).rows.map((r) => r.v)).toEqual([1, 2, 6]);
  });

  it('frees the event loop while the engine runs a statement', async () => {
    const started = performance.now();
    let timerAt = 0;
    const timer = new Promise<void>((r) =>
      setTimeout(() => {
        timerAt = performance.now() - started;
        r();
      }, 20),
    );
    await lite.query('SELECT pg_sleep(0.4)');
    const statementMs = performance.now() - started;
    await timer;
    // On PGlite in this thread the timer would fire only after the statement's 400 ms.
    expect(statementMs).toBeGreaterThanOrEqual(390);
    expect(timerAt).toBeLessThan(200);
  });

  it('moves answers and batches larger than its shared buffer, then goes on with small ones', async () => {
    const big = 'x'.repeat(3 << 20); // 3 MB: past the first buffer of 1 MB
    await lite.exec('CREATE TABLE big (v text)');
    await lite.query('INSERT INTO big VALUES ($1)', [big]);
    const back = await lite.query<{ v: string; n: number }>('SELECT v, length(v) AS n FROM big');
    expect(back.rows[0]!.n).toBe(big.length);
    expect(back.rows[0]!.v === big).toBe(true);
    const many = await lite.query<{ g: number }>('SELECT g FROM generate_series(1, 200000) AS g');
    expect(many.rows.length).toBe(200_000);
    expect(many.rows.at(-1)).toEqual({ g: 200_000 });
    expect((await lite.query<{ v: number }>('SELECT $1::int AS v', [3])).rows).toEqual([{ v: 3 }]);
  });

  it('runs the driver’s prepared statements (lib/db/pglite-prepared.ts) through the same hand-over', async () => {
    const prepared = preparedQueries(lite);
    await lite.exec('CREATE TABLE p (k text PRIMARY KEY, doc jsonb)');
    for (let i = 0; i < 3; i++) await prepared('INSERT INTO p VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET doc = EXCLUDED.doc', [`k${i % 2}`, { i }]);
    expect(await prepared('SELECT k, doc FROM p ORDER BY k', [])).toEqual([
      { k: 'k0', doc: { i: 2 } },
      { k: 'k1', doc: { i: 1 } },
    ]);
    await expect(prepared('SELECT $1::int AS v', ['x'])).rejects.toMatchObject({ code: '22P02' });
    expect(await prepared('SELECT $1::int AS v', ['5'])).toEqual([{ v: 5 }]);
  });

  it('keeps its data across a close and a reopen; a closed client refuses calls', async () => {
    const dir = await clusterDir();
    const first = await PGliteThread.open(dir);
    await first.exec('CREATE TABLE kept (v text)');
    await first.query('INSERT INTO kept VALUES ($1)', ['still here']);
    await first.close();
    await expect(first.query('SELECT 1')).rejects.toThrow(/closed/);
    const again = await PGliteThread.open(dir);
    try {
      expect((await again.query<{ v: string }>('SELECT v FROM kept')).rows).toEqual([{ v: 'still here' }]);
    } finally {
      await again.close();
    }
  });

  it('carries the platform’s database (openDatabase with pgliteThread): migrations, Prisma and its transactions, the driver', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-pglite-thread-db-'));
    dirs.push(dataDir);
    const db = await openDatabase({ dataDir, pgliteThread: true, sharedBuffersMb: 16 });
    try {
      expect(db.kind).toBe('pglite');
      const coeffs = { syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1, residueCoeff: 1, routingCoeff: 1 };
      const stack = (id: string) => ({ id, name: 'n', kind: 'human', shape: 'A', pubKey: `pk-${id}`, masterSecret: 'sealed', ...coeffs });
      const a = await db.prisma.stack.create({ data: stack('t1') });
      await expect(
        db.prisma.$transaction(async (tx) => {
          await tx.stack.create({ data: stack('t2') });
          throw new Error('abort');
        }),
      ).rejects.toThrow('abort');
      await db.prisma.$transaction(async (tx) => {
        await tx.stack.create({ data: stack('t3') });
        await tx.$queryRaw`SELECT id FROM "Stack" WHERE id = 't1' FOR UPDATE`;
      });
      expect((await db.prisma.stack.findMany({ orderBy: { tokenId: 'asc' } })).map((s) => s.id)).toEqual(['t1', 't3']);
      expect(await db.driver.query('SELECT "tokenId" FROM "Stack" WHERE id = $1', ['t1'], { prepare: true })).toEqual([{ tokenId: a.tokenId }]);
      const unique = await db.prisma.stack.create({ data: stack('t1') }).catch((e) => e);
      expect(unique).toMatchObject({ code: 'P2002' }); // the adapter maps the server's error as on PGlite in this thread
    } finally {
      await db.close();
    }
  });

  it('an idle client does not keep the process alive, and a query under way does', async () => {
    const dir = await clusterDir();
    const script = `
      import { PGliteThread } from ${JSON.stringify(path.join(path.dirname(fileURLToPath(import.meta.url)), 'pglite-thread.ts'))};
      const lite = await PGliteThread.open(${JSON.stringify(dir)});
      setTimeout(async () => {
        // Nothing else holds the loop here: the answer must still come.
        const { rows } = await lite.query('SELECT pg_sleep(0.2), 42 AS v');
        console.log('answer', rows[0].v);
      }, 10);
    `;
    const file = path.join(dir, 'last-work.mts');
    fs.writeFileSync(file, script);
    const started = Date.now();
    const child = spawnSync(process.execPath, ['--import', 'tsx', file], { encoding: 'utf8', timeout: 30_000 });
    expect(child.stderr).toBe('');
    expect(child.stdout.trim()).toBe('answer 42');
    expect(child.status).toBe(0);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 40_000);
});
