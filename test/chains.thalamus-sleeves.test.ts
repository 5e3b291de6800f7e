// The fold's sleevesRoot kept incrementally (docs/scale.md, "Thalamus fold"): the ordered leaf set
// with cached subtree hashes gives exactly the RFC 6962 root of a full recomputation after any
// sequence of spawns and decommissions, and the source over the database reads only the sleeves
// that changed since its last read (the "leafXid" stamp), including writes whose transactions
// were still open at that read.
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MerkleLeafSet, merkleRoot } from '../lib/merkle.ts';
import { sleeveLeafData, sleevesRootOf } from '../subgraphs/chains/thalamus/coherence.ts';
import { incrementalSleevesRoot } from '../subgraphs/chains/thalamus/sleeves-root.ts';
import { platformSources } from '../flows/thalamus-sources.ts';
import { sleeveLeafChanges } from '../subgraphs/sleeves/index.ts';
import { mth, sha } from './helpers/thalamus.ts';
import { testPlatformOn, type TestPlatform } from './helpers/platform.ts';

const KINDS = ['human', 'ai', 'mining', 'memory'];

/** The root as the fold computed it before: every alive sleeve, sorted, hashed from scratch. */
const fullRoot = (alive: Map<string, string>) => sleevesRootOf([...alive].map(([id, type]) => ({ id, type })));

describe('MerkleLeafSet', () => {
  it('has the RFC 6962 root of its leaves in key order after any sequence of batches', () => {
    // Small id alphabet: re-spawns of a removed id, removals of absent ids, duplicates in a batch.
    const id = fc.oneof(
      fc.integer({ min: 0, max: 60 }).map((n) => `sleeve:${KINDS[n % 4]}:${n}:${(n * 2654435761).toString(16).slice(-8)}`),
      fc.integer({ min: 0, max: 60 }).map((n) => `sleeve:0x${n.toString(16).padStart(40, '0')}`),
    );
    const change = fc.record({ id, type: fc.constantFrom(...KINDS), alive: fc.boolean() });
    fc.assert(
      fc.property(fc.array(fc.array(change, { maxLength: 40 }), { minLength: 1, maxLength: 25 }), (batches) => {
        const set = new MerkleLeafSet();
        const alive = new Map<string, string>();
        for (const batch of batches) {
          set.apply(batch.map((c) => ({ key: c.id, data: c.alive ? sleeveLeafData(c.type, c.id) : null })));
          for (const c of batch) {
            if (c.alive) alive.set(c.id, c.type);
            else alive.delete(c.id);
          }
          const root = Buffer.from(set.root()).toString('hex');
          expect(root).toBe(fullRoot(alive));
          expect(set.size).toBe(alive.size);
        }
        // The recursive definition of the RFC, independent of lib/merkle.ts.
        const sorted = [...alive].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        expect(Buffer.from(set.root()).toString('hex')).toBe(mth(sorted.map(([i, t]) => sha(Buffer.from(t + i)))).toString('hex'));
      }),
      { numRuns: 300 },
    );
  });

  it('every size up to 300, appended and removed one at a time, against merkleRoot; re-hashes nothing for a no-op batch', () => {
    const set = new MerkleLeafSet();
    const data: Uint8Array[] = [];
    const digest = (i: number) => sha(Buffer.from(`leaf${i}`)).toString('latin1');
    for (let i = 0; i < 300; i++) {
      // Keys sort as their insertion order: each change is an append.
      expect(set.apply([{ key: `k${String(i).padStart(4, '0')}`, data: digest(i) }])).toBe(i);
      data.push(sha(Buffer.from(`leaf${i}`)));
      expect(Buffer.from(set.root()).equals(Buffer.from(merkleRoot(data)))).toBe(true);
    }
    expect(
      set.apply([
        { key: 'k0007', data: digest(7) },
        { key: 'absent', data: null },
      ]),
    ).toBe(-1);
    for (let i = 0; i < 300; i++) {
      expect(set.apply([{ key: `k${String(i).padStart(4, '0')}`, data: null }])).toBe(0);
      data.shift();
      expect(Buffer.from(set.root()).equals(Buffer.from(merkleRoot(data)))).toBe(true);
    }
    expect(Buffer.from(set.root()).toString('hex')).toBe(sha().toString('hex'));
  });
});

describe.each(['pglite', 'postgres'] as const)('the fold source over %s', (engine) => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await testPlatformOn(engine === 'postgres' ? 'postgresql' : 'pglite');
  }, 120_000);
  afterAll(async () => {
    await p?.cleanup();
  });

  const feed = () => ({
    read: async (since: bigint | null) => {
      const { rows, xmin } = await sleeveLeafChanges(p.db.prisma, since);
      return { rows, cursor: xmin };
    },
  });
  const dbRoot = async () => {
    const rows = await p.db.prisma.sleeve.findMany({ where: { alive: true }, select: { id: true, embodimentType: true } });
    return sleevesRootOf(rows.map((r) => ({ id: r.id, type: r.embodimentType })));
  };
  const newId = (kind: string) =>
    Math.random() < 0.5 ? `sleeve:${kind}:${Math.floor(Math.random() * 1e6)}:${randomBytes(4).toString('hex')}` : `sleeve:0x${randomBytes(20).toString('hex')}`;

  it('random spawns and decommissions: the incremental root is the full recomputation, and each read costs the changes', async () => {
    const db = p.db.prisma;
    const src = incrementalSleevesRoot(feed());
    await db.sleeve.createMany({
      data: Array.from({ length: 40 }, () => {
        const kind = KINDS[Math.floor(Math.random() * 4)];
        return { id: newId(kind), stackId: 's', embodimentType: kind, shape: 'A', tickRate: 2000 };
      }),
    });
    expect((await src.sleevesRoot()).root).toBe(await dbRoot());
    expect(src.last).toMatchObject({ full: true, rows: 40 });
    // A read starts at the oldest transaction open at the previous one. On PostgreSQL that is
    // cluster-wide: a transaction open in another database (CI runs test files side by side) holds
    // it back, and rows stamped since are read again; never a full read, never fewer than the
    // changes. PGlite has no other transaction: exactly the changes.
    let stamped = 40;
    const expectRead = (changes: number) => {
      if (engine === 'pglite') return expect(src.last).toMatchObject({ full: false, rows: changes });
      expect(src.last.full).toBe(false);
      expect(src.last.rows).toBeGreaterThanOrEqual(changes);
      expect(src.last.rows).toBeLessThanOrEqual(stamped);
    };
    for (let step = 0; step < 30; step++) {
      const alive = await db.sleeve.findMany({ where: { alive: true }, select: { id: true } });
      const spawn = Math.floor(Math.random() * 5);
      const kill = alive.filter(() => Math.random() < 0.08).map((s) => s.id);
      const kinds = Array.from({ length: spawn }, () => KINDS[Math.floor(Math.random() * 4)]);
      if (spawn) await db.sleeve.createMany({ data: kinds.map((kind) => ({ id: newId(kind), stackId: 's', embodimentType: kind, shape: 'B', tickRate: 0 })) });
      if (kill.length) await db.sleeve.updateMany({ where: { id: { in: kill } }, data: { alive: false, decommissionedAt: new Date() } });
      // Writes that do not change a leaf are not read again.
      if (alive.length) await db.sleeve.updateMany({ where: { id: alive[0].id }, data: { driftMilli: { increment: 1000 }, syncEpoch: step } });
      const { root, count } = await src.sleevesRoot();
      expect(root).toBe(await dbRoot());
      expect(count).toBe(alive.length + spawn - kill.length);
      stamped += spawn + kill.length;
      expectRead(spawn + kill.length);
    }
    // A source made anew (a Thalamus start) rebuilds the same root from the database.
    const fresh = incrementalSleevesRoot(feed());
    expect((await fresh.sleevesRoot()).root).toBe((await src.sleevesRoot()).root);
    expectRead(0);
    // The wired sources are the incremental one.
    expect((await platformSources(p).sleeves.sleevesRoot()).root).toBe(await dbRoot());
  });

  it.runIf(engine === 'postgres')('a spawn or decommission whose transaction was open at a read is read at the next one', async () => {
    const db = p.db.prisma;
    const src = incrementalSleevesRoot(feed());
    await src.sleevesRoot();
    const victim = (await db.sleeve.findFirst({ where: { alive: true }, select: { id: true } }))!.id;
    const slow = new pg.Client({ connectionString: p.config.databaseUrl });
    await slow.connect();
    try {
      // The slow transaction gets its xid first; a later one commits and is read before it commits.
      await slow.query('BEGIN');
      const early = newId('ai');
      await slow.query(`INSERT INTO "Sleeve" (id, "stackId", "embodimentType", shape, "tickRate") VALUES ($1, 's', 'ai', 'A', 2000)`, [early]);
      await slow.query(`UPDATE "Sleeve" SET alive = false WHERE id = $1`, [victim]);
      await db.sleeve.create({ data: { id: newId('human'), stackId: 's', embodimentType: 'human', shape: 'A', tickRate: 8000 } });
      expect((await src.sleevesRoot()).root).toBe(await dbRoot());
      await slow.query('COMMIT');
      const { root } = await src.sleevesRoot();
      expect(root).toBe(await dbRoot());
      expect(await db.sleeve.count({ where: { id: early, alive: true } })).toBe(1);
    } finally {
      await slow.end();
    }
  });
});
