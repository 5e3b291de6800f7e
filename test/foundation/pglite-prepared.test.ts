// The driver's prepared statements on PGlite (lib/db/pglite-prepared.ts): parameters of every kind
// the platform sends, the same rows as an unprepared query, errors that leave the connection and the
// statement usable, and no interleaving with a Prisma transaction in progress.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform();
});
afterAll(async () => {
  await p?.cleanup();
});

const q = (text: string, params: unknown[] = []) => p.db.driver.query<Record<string, unknown>>(text, params, { prepare: true });

describe('PGlite prepared statements', () => {
  it('run with text arrays, numbers, bigints, json, booleans and nulls, as an unprepared query does', async () => {
    const text = `SELECT $1::text[] AS a, $2::int + 1 AS i, $3::bigint AS b, $4::jsonb AS j, $5::bool AS t, $6::text AS n, cardinality($1::text[]) AS c`;
    const params = [['x', 'y,z', 'with "quote"', ''], 41, 9007199254740993n, { k: [1, 'two'] }, true, null];
    const prepared = await q(text, params);
    expect(prepared).toEqual(await p.db.driver.query(text, params));
    expect(prepared[0]).toMatchObject({ a: ['x', 'y,z', 'with "quote"', ''], i: 42, j: { k: [1, 'two'] }, t: true, n: null, c: 4 });
    // Again: the statement is reused.
    expect(await q(text, [['q'], 1, 2n, null, false, 'v'])).toEqual(await p.db.driver.query(text, [['q'], 1, 2n, null, false, 'v']));
  });

  it('an error rejects that call only: the statement and the connection stay usable', async () => {
    await expect(q('SELEC 1')).rejects.toThrow();
    await expect(q('SELEC 1')).rejects.toThrow();
    const div = 'SELECT 10 / $1::int AS v';
    await expect(q(div, [0])).rejects.toThrow(/division by zero/);
    expect(await q(div, [2])).toEqual([{ v: 5 }]);
    expect(await q('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });

  it('waits for a Prisma transaction in progress instead of running inside it', async () => {
    await p.db.driver.exec('CREATE TABLE IF NOT EXISTS prepared_probe (v int)');
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const tx = p.db.prisma.$transaction(async (t) => {
      await t.$executeRawUnsafe('INSERT INTO prepared_probe VALUES (1)');
      entered();
      await released;
      await t.$executeRawUnsafe('INSERT INTO prepared_probe VALUES (2)');
    });
    await inside;
    let answered = false;
    const read = q('SELECT count(*)::int AS n FROM prepared_probe').then((rows) => ((answered = true), rows));
    await new Promise((r) => setTimeout(r, 100));
    expect(answered).toBe(false);
    release();
    await tx;
    expect(await read).toEqual([{ n: 2 }]);
  });

  it('keeps working past the number of statements it keeps prepared', async () => {
    for (let i = 0; i < 1010; i++) expect(await q(`SELECT ${i} + $1::int AS v`, [1])).toEqual([{ v: i + 1 }]);
    expect(await q('SELECT 0 + $1::int AS v', [5])).toEqual([{ v: 5 }]);
  });

  it('a long chain of statements gives the event loop a turn (PGlite never waits on I/O)', async () => {
    // Without the turn lib/db gives, these calls resolve as microtasks one after another and the
    // callback below (a request's socket read) waits until the chain ends.
    let turned = false;
    setImmediate(() => {
      turned = true;
    });
    const t0 = performance.now();
    let calls = 0;
    while (!turned && performance.now() - t0 < 500) {
      await q('SELECT $1::int AS v', [calls]);
      await p.db.prisma.$queryRaw`SELECT 1`;
      calls++;
    }
    expect(turned).toBe(true);
    expect(performance.now() - t0).toBeLessThan(200);
  });
});
