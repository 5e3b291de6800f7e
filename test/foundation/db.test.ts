import { describe, it, expect, afterAll } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase, sql, transactionRetries, TX_ATTEMPTS, type Database } from '../../lib/db/index.ts';
import { runStatement } from '../../lib/db/statement.ts';
import { databaseProblem } from '../../lib/errors.ts';
import { migrate, readMigrations } from '../../lib/db/migrate.ts';
import { pendingSql } from '../../prisma/diff.ts';
import { freshDatabase } from '../helpers/postgres.ts';

const stackData = (id: string) => ({
  id,
  name: 'n',
  kind: 'human',
  shape: 'A',
  pubKey: `pk-${id}`,
  syncCoeff: 1,
  memoryCoeff: 1,
  computeCoeff: 1,
  residueCoeff: 1,
  routingCoeff: 1,
  masterSecret: 'sealed',
});

async function exercise(db: Database) {
  // The tables every write grows are analysed at a statistics target of 10 (a 3,000-row sample;
  // migration 20261206074500_hot_tables_statistics): a column added without it brings back the
  // 30,000-row sample, ten times the analyse that holds the writers every time they grow a tenth.
  const coarse = await db.driver.query<{ table: string; column: string }>(
    `SELECT attrelid::regclass::text AS table, attname AS column FROM pg_attribute
     WHERE attrelid IN ('"MemoryNode"'::regclass, '"LedgerEntry"'::regclass, '"ChainLedgerIntent"'::regclass)
       AND attnum > 0 AND NOT attisdropped AND attstattarget IS DISTINCT FROM 10`,
  );
  expect(coarse).toEqual([]);
  const a = await db.prisma.stack.create({ data: stackData('s1') });
  const b = await db.prisma.stack.create({ data: stackData('s2') });
  expect(b.tokenId).toBe(a.tokenId + 1);
  // Row locks inside interactive transactions work through the adapter.
  const locked = await db.prisma.$transaction(async (tx) => tx.$queryRaw<{ id: string }[]>`SELECT id FROM "Stack" WHERE id = 's1' FOR UPDATE`);
  expect(locked).toEqual([{ id: 's1' }]);
  // A failed transaction leaves nothing behind.
  await expect(
    db.prisma.$transaction(async (tx) => {
      await tx.stack.create({ data: stackData('s3') });
      throw new Error('abort');
    }),
  ).rejects.toThrow('abort');
  expect(await db.prisma.stack.count()).toBe(2);
  // Migrating again is a no-op.
  expect(await migrate(db.driver)).toEqual([]);
}

describe('database', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  it('PGlite under the data dir: migrated at open, state survives a reopen', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-db-'));
    dirs.push(dataDir);
    const db = await openDatabase({ dataDir });
    expect(db.kind).toBe('pglite');
    await exercise(db);
    expect(await db.driver.query('SHOW shared_buffers')).toEqual([{ shared_buffers: '128MB' }]); // the cluster's own setting
    await db.close();
    // PGLITE_SHARED_BUFFERS_MB reaches the engine as a start parameter (the cluster's file unchanged).
    const again = await openDatabase({ dataDir, sharedBuffersMb: 24 });
    expect(await again.prisma.stack.count()).toBe(2);
    expect(await again.driver.query('SHOW shared_buffers')).toEqual([{ shared_buffers: '24MB' }]);
    await again.close();
  }, 90_000); // two PGlite starts, one migrating from empty: past 30 s on a loaded 2-core machine

  it('PGlite keeps the hot path statements prepared: parsed once, the same rows as an unprepared query, errors with the server message', async () => {
    const db = await openDatabase({ dataDir: '', inMemory: true });
    try {
      const text = `SELECT $1::text AS t, $2::bigint AS n, $3::int AS i, $4::jsonb AS j, $5::text[] AS a, $6::boolean AS b, $7::timestamptz AS at, NULL::text AS z`;
      const params = ['x', '9007199254740993', 7, JSON.stringify({ k: [1, 'v'] }), ['p', 'q'], true, '2026-01-02T03:04:05.678Z'];
      const plain = await db.driver.query(text, params);
      const first = await db.driver.query(text, params, { prepare: true });
      const other = ['y', '1', 8, 'null', [], false, '2026-01-02T03:04:05.678Z'];
      const again = await db.driver.query(text, other, { prepare: true });
      expect(first).toEqual(plain);
      expect(again).toEqual(await db.driver.query(text, other));
      expect(again[0]).toMatchObject({ t: 'y', i: 8, j: null, a: [], b: false, z: null });
      const named = await db.driver.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1`, [text]);
      expect(named).toEqual([{ n: 1 }]);
      // A failing prepared statement throws the server's message, and the database goes on.
      await expect(db.driver.query(`SELECT cog_require(false, 'cog_check:3')`, [], { prepare: true })).rejects.toThrow(/cog_check:3/);
      expect(await db.driver.query(text, params, { prepare: true })).toEqual(plain);
      // While a Prisma transaction is open, a prepared statement waits for it to end.
      let entered!: () => void;
      const open = new Promise<void>((r) => (entered = r));
      let done = false;
      const tx = db.prisma.$transaction(async (t) => {
        await t.$queryRaw`SELECT 1`;
        entered();
        await t.$executeRaw`SELECT pg_sleep(0.05)`;
        done = true;
      });
      await open;
      await db.driver.query(text, params, { prepare: true });
      expect(done).toBe(true);
      await tx;
    } finally {
      await db.close();
    }
  });

  it('PostgreSQL through @prisma/adapter-pg', async () => {
    const pgdb = await freshDatabase();
    try {
      const db = await openDatabase({ databaseUrl: pgdb.url, dataDir: os.tmpdir() });
      expect(db.kind).toBe('postgres');
      await exercise(db);
      // Concurrent openers (several services starting at once) migrate exactly once.
      const others = await Promise.all([1, 2, 3].map(() => openDatabase({ databaseUrl: pgdb.url, dataDir: os.tmpdir() })));
      const applied = await db.driver.query<{ n: string }>('SELECT count(*)::text AS n FROM _cog_migrations');
      expect(Number(applied[0].n)).toBe(readMigrations().length);
      // No JIT on the platform's connections, through Prisma and the driver alike (docs/decisions.md).
      expect((await db.prisma.$queryRawUnsafe<{ jit: string }[]>('SHOW jit'))[0]!.jit).toBe('off');
      expect((await db.driver.query<{ jit: string }>('SHOW jit'))[0]!.jit).toBe('off');
      await Promise.all(others.map((o) => o.close()));
      await db.close();
    } finally {
      await pgdb.drop();
    }
  });

  it('PostgreSQL: a transaction aborted for a deadlock runs again, once applied; other failures are not retried', async () => {
    const pgdb = await freshDatabase();
    const db = await openDatabase({ databaseUrl: pgdb.url, dataDir: os.tmpdir() });
    try {
      await db.prisma.stack.createMany({ data: [stackData('s1'), stackData('s2')] });
      // Two transactions take the two rows in opposite orders, each holding its first lock until
      // the other has its own: PostgreSQL detects the deadlock and aborts one of them.
      let held = 0;
      const bothHeld = new Promise<void>((resolve) => {
        const check = setInterval(() => {
          if (held >= 2) {
            clearInterval(check);
            resolve();
          }
        }, 5);
      });
      const attempts = { a: 0, b: 0 };
      const crossing = (mine: 'a' | 'b', first: string, second: string) =>
        db.prisma.$transaction(
          async (tx) => {
            attempts[mine]++;
            await tx.$executeRaw`UPDATE "Stack" SET name = name || ${mine} WHERE id = ${first}`;
            if (attempts[mine] === 1) {
              held++;
              await bothHeld;
            }
            await tx.$executeRaw`UPDATE "Stack" SET name = name || ${mine} WHERE id = ${second}`;
            return mine;
          },
          { timeout: 20_000 },
        );
      const before = transactionRetries();
      expect(await Promise.all([crossing('a', 's1', 's2'), crossing('b', 's2', 's1')])).toEqual(['a', 'b']);
      expect(attempts.a + attempts.b, 'one of the two ran again').toBe(3);
      expect(transactionRetries()).toBe(before + 1);
      // Each applied exactly once: the aborted attempt left nothing behind.
      for (const id of ['s1', 's2']) {
        const { name } = (await db.prisma.stack.findUnique({ where: { id } }))!;
        expect([...name].sort().join(''), id).toBe('abn');
      }
      // A failure that is not transient (here a unique violation) is not run again.
      let tries = 0;
      await expect(
        db.prisma.$transaction(async (tx) => {
          tries++;
          await tx.stack.create({ data: stackData('s1') });
        }),
      ).rejects.toThrow();
      expect(tries).toBe(1);
      expect(TX_ATTEMPTS).toBeGreaterThan(1);
    } finally {
      await db.close();
      await pgdb.drop();
    }
  });

  it("PostgreSQL through the driver: a refused connection is the database's 503, a check's failure the caller's error", async () => {
    // Port 1: nothing listens, as when the server is stopped (faults.postgres).
    const down = await openDatabase({ databaseUrl: 'postgresql://postgres@127.0.0.1:1/none', dataDir: os.tmpdir(), migrated: true });
    try {
      const err = await down.driver.query('SELECT 1').catch((e: unknown) => e);
      expect(databaseProblem(err)?.status).toBe(503);
      // The same code from anything else (an HTTP call) is not the database's.
      expect(databaseProblem(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBeUndefined();
    } finally {
      await down.close();
    }
    const fresh = await freshDatabase();
    const db = await openDatabase({ databaseUrl: fresh.url, dataDir: os.tmpdir() });
    const one = await openDatabase({ databaseUrl: fresh.url, dataDir: os.tmpdir(), poolSize: 1, migrated: true });
    try {
      // Every connection of the pool busy past a transaction's maxWait (an overloaded platform): a
      // retryable 503, not a 500.
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      const holding = one.prisma.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1`;
        await held;
      });
      await new Promise((r) => setTimeout(r, 100));
      const waited = await one.prisma.$transaction(async (tx) => tx.$queryRaw`SELECT 1`, { maxWait: 200 }).catch((e: unknown) => e);
      expect((waited as { code?: string }).code).toBe('P2028');
      expect(databaseProblem(waited)).toMatchObject({ status: 503 });
      release();
      await holding;
      // A transaction run past its timeout: the same.
      const late = await one.prisma
        .$transaction(
          async (tx) => {
            await tx.$queryRaw`SELECT 1`;
            await new Promise((r) => setTimeout(r, 400));
            return tx.$queryRaw`SELECT 1`;
          },
          { timeout: 100 },
        )
        .catch((e: unknown) => e);
      expect((late as { code?: string }).code).toBe('P2028');
      expect(databaseProblem(late)).toMatchObject({ status: 503 });
      // Another P2028 (a transaction used after it closed: a bug) stays unmapped.
      expect(databaseProblem(Object.assign(new Error('Transaction API error: Transaction not found.'), { code: 'P2028' }))).toBeUndefined();
      class Refused extends Error {}
      const part = { checks: [{ holds: sql`1 = 2`, fail: () => new Refused('no') }] };
      await expect(runStatement(db, [part])).rejects.toBeInstanceOf(Refused);
      expect(await runStatement(db, [{ outputs: [{ name: 'v', expr: sql`40 + 2` }] }])).toEqual({ v: 42 });
    } finally {
      await one.close();
      await db.close();
      await fresh.drop();
    }
  }, 60_000);

  it('an applied migration that was edited stops the start', async () => {
    const db = await openDatabase({ dataDir: '', inMemory: true });
    const first = readMigrations()[0];
    await db.driver.query('UPDATE _cog_migrations SET checksum = $1 WHERE name = $2', ['0'.repeat(64), first.name]);
    await expect(migrate(db.driver)).rejects.toThrow(/changed after it was applied/);
    await db.close();
  });

  it('prisma/migrations match schema.prisma (no drift)', () => {
    expect(pendingSql()).toBe('');
  }, 120_000);
});
