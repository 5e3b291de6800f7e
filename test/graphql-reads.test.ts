// The GraphQL list reads through the driver (one json value a read, lib/db/statement.ts): stacks,
// sleeves and a stack's alive totals read as json give what the Prisma rows give through the same
// views (dates to the millisecond, floats, a decommissioned sleeve's snapshot, balances summed to
// the milli-unit); and batchedReads runs the reads of one turn as one statement, a failing read
// failing only its own caller. On PGlite and on PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { freshDatabase } from './helpers/postgres.ts';
import { sql } from '../lib/db/index.ts';
import { batchedReads, readStatement, type ReadPart } from '../lib/db/statement.ts';
import { stacksByIdRead, stacksInTokenOrderRead } from '../subgraphs/stacks/stacks.ts';
import { aliveSleeveTotals, sleevesByIdRead, sleevesOfStacksRead, sleeveView } from '../subgraphs/sleeves/sleeves.ts';
import { addAmounts, balancesOf, sleeveAccount, zeroAmounts } from '../subgraphs/economy/ledger.ts';

for (const engine of ['pglite', 'postgres'] as const) {
  describe(`GraphQL reads through the driver on ${engine}`, () => {
    let p: TestPlatform;
    let drop: (() => Promise<void>) | undefined;
    const stackIds = ['stack:human:1:aaaaaaaaaaaa', 'stack:ai:2:bbbbbbbbbbbb', 'stack:human:3:cccccccccccc'];

    beforeAll(async () => {
      let env: Record<string, string> = {};
      if (engine === 'postgres') {
        const fresh = await freshDatabase();
        drop = fresh.drop;
        env = { DATABASE_URL: fresh.url };
      }
      p = await testPlatform(env);
      const dates = [new Date('2024-02-29T23:59:59.999Z'), new Date('2025-01-01T00:00:00.001Z'), new Date('1999-12-31T12:00:00.000Z')];
      for (const [i, id] of stackIds.entries()) {
        await p.db.prisma.stack.create({
          data: {
            id,
            name: `n${i}`,
            kind: i === 1 ? 'ai' : 'human',
            shape: 'A',
            pubKey: String(i).repeat(64),
            syncCoeff: 0.1 * (i + 1),
            memoryCoeff: 1 / 3,
            computeCoeff: 2,
            residueCoeff: 0,
            routingCoeff: 1.25,
            bindingDecay: 0.07,
            masterSecret: 'sealed',
            episodicHead: i === 0 ? `cog://${'a'.repeat(64)}@3` : null,
            createdAt: dates[i],
          },
        });
      }
      const sleeves = [
        { id: 'sleeve:ai:1:00000001', stackId: stackIds[0]!, alive: true, driftMilli: 1234, hostname: 'h', identityPort: 4100 },
        { id: 'sleeve:ai:2:00000002', stackId: stackIds[0]!, alive: false, finalTokens: { compute: 1.5, memory: 2 }, frozen: true },
        { id: 'sleeve:ai:3:00000003', stackId: stackIds[1]!, alive: true, driftMilli: 7 },
        { id: 'sleeve:ai:4:00000004', stackId: stackIds[0]!, alive: true },
      ];
      for (const [i, s] of sleeves.entries()) {
        await p.db.prisma.sleeve.create({
          data: { embodimentType: 'ai', shape: 'A', tickRate: 2000, ...s, lastSync: dates[i % 3], createdAt: dates[(i + 1) % 3] },
        });
      }
      await p.db.prisma.balance.createMany({
        data: [
          { account: sleeveAccount('sleeve:ai:1:00000001'), token: 'memory', milli: 100n },
          { account: sleeveAccount('sleeve:ai:4:00000004'), token: 'memory', milli: 200n },
          { account: sleeveAccount('sleeve:ai:1:00000001'), token: 'compute', milli: 1001n },
          { account: sleeveAccount('sleeve:ai:4:00000004'), token: 'unknown', milli: 5n },
          { account: sleeveAccount('sleeve:ai:2:00000002'), token: 'sync', milli: 999n }, // not alive: not counted
          { account: sleeveAccount('sleeve:ai:3:00000003'), token: 'residue', milli: 9007199254740993n },
        ],
      });
    });
    afterAll(async () => {
      await p?.cleanup();
      await drop?.();
    });

    it('stacks read as json are the rows without the secret, createdAt as toISOString gives it', async () => {
      const rows = await p.db.prisma.stack.findMany({ orderBy: { tokenId: 'asc' } });
      const expected = rows.map(({ masterSecret, shape, headSleeveId, headEpoch, mirroredHead, headUnmirrored, createdAt, ...r }) => ({
        ...r,
        createdAt: createdAt.toISOString(),
      }));
      const { first2, all, some, none } = await readStatement(p.db, {
        first2: stacksInTokenOrderRead(2),
        all: stacksInTokenOrderRead(1000),
        some: stacksByIdRead([stackIds[2]!, 'stack:nope', stackIds[0]!]),
        none: stacksInTokenOrderRead(0),
      });
      expect(all).toEqual(expected);
      expect(first2).toEqual(expected.slice(0, 2));
      expect(some.sort((a, b) => a.tokenId - b.tokenId)).toEqual([expected[0], expected[2]]);
      expect(none).toEqual([]);
      expect(JSON.stringify(all)).not.toContain('sealed');
    });

    it('sleeves read as json give the same views as their rows', async () => {
      const rows = await p.db.prisma.sleeve.findMany({ where: { stackId: { in: stackIds } }, orderBy: { seq: 'asc' } });
      const views = rows.map((r) => sleeveView(r, zeroAmounts()));
      const { ofStacks, byId } = await readStatement(p.db, {
        ofStacks: sleevesOfStacksRead(stackIds),
        byId: sleevesByIdRead(['sleeve:ai:2:00000002', 'sleeve:nope']),
      });
      expect(ofStacks.map((r) => sleeveView(r, zeroAmounts()))).toEqual(views);
      expect(byId.map((r) => sleeveView(r, zeroAmounts()))).toEqual(views.filter((v) => v.id === 'sleeve:ai:2:00000002'));
      expect(views.find((v) => v.id === 'sleeve:ai:2:00000002')!.tokens).toMatchObject({ compute: 1.5, memory: 2 });
    });

    it("a stack's alive totals, summed in the database, equal the sum of its alive sleeves' balances", async () => {
      const alive = await p.db.prisma.sleeve.findMany({ where: { alive: true, stackId: { in: stackIds } } });
      const balances = await balancesOf(
        p.db.prisma,
        alive.map((s) => sleeveAccount(s.id)),
      );
      const expected = new Map(stackIds.map((id) => [id, zeroAmounts()]));
      for (const s of alive) addAmounts(expected.get(s.stackId)!, balances.get(sleeveAccount(s.id))!);
      expect(await aliveSleeveTotals(p.db, stackIds)).toEqual(expected);
      expect(await aliveSleeveTotals(p.db.prisma, stackIds)).toEqual(expected);
      expect(expected.get(stackIds[0]!)).toEqual({ compute: 1.001, memory: 0.3, sync: 0, routing: 0, residue: 0 });
      expect(await aliveSleeveTotals(p.db, [])).toEqual(new Map());
    });

    it('batchedReads: the reads of one turn are one statement; a failing read fails only its caller', async () => {
      const reads = batchedReads(p.db);
      const one = (n: number): ReadPart<number> => ({ expr: sql`SELECT ${n}::int + 1`, parse: (v) => Number(v) });
      let before = p.db.statementCount();
      expect(await Promise.all([reads(one(1)), reads(one(2)), reads(stacksByIdRead([stackIds[1]!]))])).toEqual([
        2,
        3,
        [expect.objectContaining({ id: stackIds[1] })],
      ]);
      expect(p.db.statementCount() - before).toBe(1);
      // Reads queued from the batch functions of loaders dispatched in the same turn join too.
      before = p.db.statementCount();
      const later = await Promise.all([1, 2, 3].map((n) => Promise.resolve().then(() => reads(one(n)))));
      expect(later).toEqual([2, 3, 4]);
      expect(p.db.statementCount() - before).toBe(1);
      const failing: ReadPart<number> = { expr: sql`SELECT 1 / (${0}::int)`, parse: Number };
      const unparsable: ReadPart<number> = {
        expr: sql`SELECT 1`,
        parse: () => {
          throw new Error('unparsable');
        },
      };
      const settled = await Promise.allSettled([reads(one(5)), reads(failing), reads(unparsable), reads(one(6))]);
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
      expect(settled.filter((s) => s.status === 'fulfilled').map((s) => (s as PromiseFulfilledResult<number>).value)).toEqual([6, 7]);
      expect(String((settled[2] as PromiseRejectedResult).reason)).toContain('unparsable');
    });
  });
}
