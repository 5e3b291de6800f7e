// Sleeves across many runtimes (docs/scale.md): runtimes over one database share the alive sleeves
// by leases. Every alive sleeve is run (ticked, its identity served) by exactly one runtime; a
// joining runtime gets its fair share; a runtime that stops renewing (what kill -9 leaves) has its
// sleeves taken by the others within two lease periods (an epoch each in production); renewing
// writes no lease; a runtime back under the same id takes its sleeves at once. On PGlite and on
// this machine's PostgreSQL (concurrent claims there really race).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, testPlatformOn, type TestPlatform } from '../../../test/helpers/platform.ts';
import { createStack } from '../../stacks/stacks.ts';
import { decommissionSleeve, getSleeveView, spawnSleeve } from '../sleeves.ts';
import { sql } from '../../../lib/db/index.ts';
import { fairShare, fencedTicks, fencedTicksQuery, survey, type Holder } from './leases.ts';
import { MAX_TICK_QUANTUM_MS, TICK_QUANTUM_MS, startRuntime, tickQuantum, type SleeveRuntime } from './runtime.ts';
import { DueHeap, timerWheel } from './wheel.ts';

const LEASE_MS = 800;
const N = 10;

/** The runtime that holds a sleeve now: its lease's holder, at the holder's generation, with a live beat. */
const liveHolder = async (p: TestPlatform, sleeveId: string) =>
  (
    await p.db.prisma.$queryRaw<{ runtime: string }[]>`SELECT l.runtime FROM "SleeveLease" l
      JOIN "SleeveRuntimeBeat" b ON b.id = l.runtime AND b.gen = l.gen AND b."expiresAt" > now() WHERE l."sleeveId" = ${sleeveId}`
  )[0]?.runtime;

const until = async (cond: () => Promise<boolean> | boolean, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('fair shares and the due heap', () => {
  it('shares add up to the sleeves, the remainder to the first runtimes by id', () => {
    expect(['a', 'b', 'c'].map((me) => fairShare(10, ['a', 'b', 'c'], me))).toEqual([4, 3, 3]);
    expect(fairShare(10, ['a', 'b'], 'c')).toBe(3); // not yet counted: one more, last
    expect(fairShare(0, [], 'a')).toBe(0);
    for (let n = 0; n < 50; n++)
      for (let r = 1; r < 7; r++) {
        const ids = Array.from({ length: r }, (_, i) => `r${i}`);
        expect(ids.reduce((s, me) => s + fairShare(n, ids, me), 0)).toBe(n);
      }
  });

  it('shares follow the weights, add up to the sleeves, and a weight of 0 is a standby', () => {
    const ids = ['a', 'b', 'c'];
    const share = (n: number, w: number[]) => ids.map((me, i) => fairShare(n, ids, me, w, w[i]));
    expect(share(100, [1, 2, 1])).toEqual([25, 50, 25]);
    expect(share(10, [1, 2, 1])).toEqual([3, 5, 2]); // 2.5, 5, 2.5: the remainder by id
    expect(share(100_000, [0, 1, 1])).toEqual([0, 50_000, 50_000]);
    expect(share(7, [0, 0, 0])).toEqual([3, 2, 2]); // none with a weight: equal, as without weights
    expect(share(9, [1, 1, 1])).toEqual(ids.map((me) => fairShare(9, ids, me)));
    // Not yet among them: counted with its own weight, last.
    expect(fairShare(90, ['a', 'b'], 'c', [1, 1], 1)).toBe(30);
    expect(fairShare(90, ['a', 'b'], 'c', [1, 1], 0)).toBe(0);
    for (let n = 0; n < 60; n++)
      for (const w of [
        [1, 2, 3],
        [0, 5, 1],
        [3, 0, 0],
        [7, 7, 2],
        [0, 0, 0],
      ]) {
        const shares = share(n, w);
        expect(shares.reduce((x, y) => x + y, 0)).toBe(n);
        const total = w.reduce((x, y) => x + y, 0);
        // Each within one of its exact quota.
        if (total > 0) shares.forEach((x, i) => expect(Math.abs(x - (n * w[i]!) / total)).toBeLessThan(1));
        if (total > 0) shares.forEach((x, i) => w[i] === 0 && expect(x).toBe(0));
      }
  });

  it('a wheel with a quantum fires what comes due within one quantum together, at its end', async () => {
    const fired: Array<{ id: string; t: number }> = [];
    const w = timerWheel({ quantumMs: 50, current: () => true, fire: (d) => void fired.push({ id: d.id, t: Date.now() }) });
    // A quantum boundary at least 60 ms ahead; a, b and c fall in the quantum that ends there, d in the next.
    const end = Math.ceil((Date.now() + 60) / 50) * 50;
    for (const [id, off] of [
      ['d', 25],
      ['b', -30],
      ['a', -49],
      ['c', -1],
    ] as const)
      w.add({ at: end + off, id, gen: 0 });
    await until(() => fired.length === 4, 3000);
    w.stop();
    expect(fired.map((f) => f.id)).toEqual(['a', 'b', 'c', 'd']);
    const t = Object.fromEntries(fired.map((f) => [f.id, f.t]));
    // Not at their own due times (the timer's clock may round a millisecond either way), but at the
    // quantum's end, in one go.
    expect(t.a!).toBeGreaterThanOrEqual(end - 2);
    expect(t.c! - t.a!).toBeLessThanOrEqual(5);
    // d, due in the next quantum, not before it is due (at that quantum's end, unless this one's
    // timer went off more than 25 ms late, as a loaded machine may).
    expect(t.d!).toBeGreaterThanOrEqual(end + 25);
  });

  it("an entry with a quantum of its own fires at that quantum's end, ordered among the others by when each fires", async () => {
    const fired: Array<{ id: string; t: number }> = [];
    const w = timerWheel({ quantumMs: 25, current: () => true, fire: (d) => void fired.push({ id: d.id, t: Date.now() }) });
    // A 200 ms boundary at least 120 ms ahead: `slow` (quantum 200) is due first but fires at that
    // boundary; `fast` (the wheel's 25 ms) is due after it and fires at its own 25 ms boundary, well before.
    const end = Math.ceil((Date.now() + 120) / 200) * 200;
    w.add({ at: end - 190, id: 'slow', gen: 0, quantumMs: 200 });
    w.add({ at: end - 120, id: 'fast', gen: 0 });
    w.add({ at: end - 5, id: 'slow2', gen: 0, quantumMs: 200 });
    await until(() => fired.length === 3, 3000);
    w.stop();
    expect(fired.map((f) => f.id)).toEqual(['fast', 'slow', 'slow2']);
    const t = Object.fromEntries(fired.map((f) => [f.id, f.t]));
    expect(t.fast!).toBeGreaterThanOrEqual(end - 120 - 2);
    expect(t.fast!).toBeLessThan(end - 20); // its own quantum's end (end - 100), not the slow ones'
    expect(t.slow!).toBeGreaterThanOrEqual(end - 2); // not at its due time: at its quantum's end
    expect(t.slow2! - t.slow!).toBeLessThanOrEqual(5); // in the same go
  });

  it("a sleeve's tick quantum: a 64th of its period, from 25 ms to 125 ms", () => {
    expect(tickQuantum(300)).toBe(TICK_QUANTUM_MS);
    expect(tickQuantum(2000)).toBe(31);
    expect(tickQuantum(8000)).toBe(MAX_TICK_QUANTUM_MS);
    expect(tickQuantum(60_000)).toBe(MAX_TICK_QUANTUM_MS);
  });

  it('pops in due order', () => {
    const h = new DueHeap();
    const ats = Array.from({ length: 200 }, () => Math.floor(Math.random() * 1000));
    for (const at of ats) h.push({ at, id: String(at), gen: 0 });
    const out: number[] = [];
    while (h.size) out.push(h.pop()!.at);
    expect(out).toEqual([...ats].sort((a, b) => a - b));
  });
});

describe.each(['pglite', 'postgresql'] as const)('runtimes sharing sleeves (%s)', (engine) => {
  let p: TestPlatform;
  const rts: SleeveRuntime[] = [];
  /** Which runtimes ran a tick of each sleeve (their tick handlers). */
  const tickedBy = new Map<string, Set<string>>();
  const sleeves: string[] = [];
  /** Sampled every 10 ms: a sleeve held by two runtimes at once. */
  const overlaps: string[] = [];
  let sampler: NodeJS.Timeout | undefined;

  const start = async (id: string) => {
    const rt = await startRuntime(p, { id, leaseMs: LEASE_MS, reconcileMs: 60_000 });
    rt.onTick('ai', (s) => {
      const set = tickedBy.get(s.id) ?? new Set();
      set.add(id);
      tickedBy.set(s.id, set);
    });
    rts.push(rt);
    return rt;
  };
  const holders = (live: SleeveRuntime[]) => {
    const m = new Map<string, string[]>();
    for (const rt of live) for (const s of rt.running()) m.set(s, [...(m.get(s) ?? []), rt.id]);
    return m;
  };
  const covered = (live: SleeveRuntime[], sizes?: number[]) => {
    const h = holders(live);
    const ok = sleeves.every((s) => h.get(s)?.length === 1);
    return ok && (!sizes || live.map((r) => r.running().length).join() === sizes.join());
  };

  beforeAll(async () => {
    p = await testPlatformOn(engine);
    const stack = await createStack(p, { name: `rt-${engine}` });
    for (let i = 0; i < N; i++) sleeves.push((await spawnSleeve(p, { stackId: stack.id, kind: 'ai', tickRate: 100, shape: 'B' })).id);
    sampler = setInterval(() => {
      for (const [s, h] of holders(rts)) if (h.length > 1) overlaps.push(`${s}: ${h.join(', ')}`);
    }, 10);
  }, 60_000);
  afterAll(async () => {
    clearInterval(sampler);
    for (const rt of rts) await rt.close().catch(() => {});
    await p?.cleanup();
  });

  it('two runtimes: every alive sleeve run and ticked by exactly one, five each', async () => {
    const [a, b] = [await start('rt-a'), await start('rt-b')];
    await until(() => covered([a, b], [5, 5]));
    const leases = await p.db.prisma.sleeveLease.findMany();
    expect(leases.map((l) => l.sleeveId).sort()).toEqual([...sleeves].sort());
    expect(new Set(leases.map((l) => l.runtime))).toEqual(new Set(['rt-a', 'rt-b']));
    // A stable window: every sleeve ticks, each by its one holder.
    tickedBy.clear();
    await until(() => sleeves.every((s) => (tickedBy.get(s)?.size ?? 0) > 0) && [...tickedBy.values()].every((x) => x.size === 1), 5000);
    await new Promise((r) => setTimeout(r, 500));
    const h = holders([a, b]);
    for (const s of sleeves) expect([...tickedBy.get(s)!], s).toEqual(h.get(s));
    // Each sleeve's identity, on its holder's listener.
    for (const s of sleeves) {
      const v = await getSleeveView(p, s);
      const holder = h.get(s)![0] === 'rt-a' ? a : b;
      expect(v.identityUrl).toBe(`http://127.0.0.1:${holder.port}/sleeves/${encodeURIComponent(s)}/identity`);
      const id = await fetch(v.identityUrl!).then((r) => r.json());
      expect(id).toMatchObject({ sleeveId: s, kind: 'ai', stackId: v.stackId });
      expect(typeof (id as { hostname: unknown }).hostname).toBe('string');
      // The other runtime's listener does not serve it.
      const other = holder === a ? b : a;
      expect((await fetch(`http://127.0.0.1:${other.port}/sleeves/${encodeURIComponent(s)}/identity`)).status).toBe(404);
    }
  }, 30_000);

  it('a third runtime joining takes its fair share (4, 3, 3 by id)', async () => {
    const [a, b] = rts;
    const c = await start('rt-c');
    const t0 = Date.now();
    await until(() => covered([a!, b!, c], [4, 3, 3]));
    expect(Date.now() - t0).toBeLessThan(2 * LEASE_MS);
    tickedBy.clear();
    await until(() => (tickedBy.get(c.running()[0]!)?.size ?? 0) > 0);
    await new Promise((r) => setTimeout(r, 300));
    for (const [s, by] of tickedBy) expect([...by], s).toEqual(holders([a!, b!, c]).get(s));
  }, 30_000);

  it('a runtime that stops renewing (kill -9) has its sleeves run elsewhere within two lease periods', async () => {
    const [a, b, c] = rts;
    const lost = a!.running();
    expect(lost.length).toBe(4);
    await a!.abandon(); // no release, no heartbeat end: the leases just stop being renewed
    const t0 = Date.now();
    await until(() => covered([b!, c!], [5, 5]), 4 * LEASE_MS);
    const took = Date.now() - t0;
    console.log(`${engine}: handed over in ${took} ms (lease ${LEASE_MS} ms)`);
    expect(took).toBeLessThanOrEqual(2 * LEASE_MS);
    // Its sleeves tick again, on their new holders, and answer there.
    tickedBy.clear();
    await until(() => lost.every((s) => (tickedBy.get(s)?.size ?? 0) > 0));
    for (const s of lost) {
      expect([...tickedBy.get(s)!]).not.toContain('rt-a');
      const v = await getSleeveView(p, s);
      expect(v.identityUrl).not.toContain(`:${a!.port}/`);
      expect(await fetch(v.identityUrl!).then((r) => r.json())).toMatchObject({ sleeveId: s });
    }
    rts.splice(0, 1);
  }, 30_000);

  it('spawned and decommissioned sleeves come and go; no sleeve was ever held by two runtimes', async () => {
    const [b, c] = rts;
    const stack = await createStack(p, { name: `rt2-${engine}` });
    const fresh = (await spawnSleeve(p, { stackId: stack.id, kind: 'ai', tickRate: 100, shape: 'B' })).id;
    sleeves.push(fresh);
    await until(() => covered([b!, c!]));
    const gone = sleeves.shift()!;
    await decommissionSleeve(p, gone, 'test');
    expect(await p.db.prisma.sleeveLease.count({ where: { sleeveId: gone } })).toBe(0);
    await until(() => !holders([b!, c!]).has(gone) && covered([b!, c!], [5, 5]));
    expect(overlaps).toEqual([]);
    // The count the shares are computed from, kept without reading the leases: the holders' `held`
    // less the ends not yet read, plus the free leases.
    await until(async () => (await survey(p.db.prisma)).sleeves === sleeves.length);
    expect(await p.db.prisma.sleeveLease.count()).toBe(sleeves.length);
  }, 30_000);

  it.runIf(engine === 'postgresql')(
    "a batch's fence waits for no row lock (a lease a claim holds, a Sleeve row a perceive holds), passes only what the runtime leases, and writes nothing",
    async () => {
      const [b, c] = rts;
      const [busy, free] = b!.running();
      const other = c!.running()[0]!;
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      const tx = p.db.prisma.$transaction(
        async (t) => {
          // A claim moving busy's lease, and a perceive holding free's Sleeve row.
          await t.$executeRaw`SELECT 1 FROM "SleeveLease" WHERE "sleeveId" = ${busy!} FOR UPDATE`;
          await t.$executeRaw`SELECT 1 FROM "Sleeve" WHERE id = ${free!} FOR UPDATE`;
          await held;
        },
        { timeout: 10_000 },
      );
      await new Promise((r) => setTimeout(r, 200));
      // The leases are 800 ms and the runtimes keep rebalancing: on a loaded machine b's lease on a
      // row may lapse or move between two statements. A row b leases throughout must pass; one it
      // leases at neither end must not (the fence); a row whose lease changed meanwhile may go
      // either way.
      const leasedByB = async (id: string) => (await liveHolder(p, id)) === b!.id;
      const versions = async (ids: string[]) =>
        new Map(
          (
            await p.db.prisma.$queryRaw<{ id: string; v: string }[]>`SELECT "sleeveId" AS id, xmin::text AS v FROM "SleeveLease" WHERE "sleeveId" = ANY(${ids})`
          ).map((r) => [r.id, r.v]),
        );
      try {
        const ids = [busy!, free!, other];
        const before = await Promise.all(ids.map(leasedByB));
        const rows = await versions(ids);
        const t0 = Date.now();
        const passed = await fencedTicks(p.db, b!.lease()!, ids);
        expect(Date.now() - t0).toBeLessThan(5_000); // the open transaction holds its locks until released below
        const after = await Promise.all(ids.map(leasedByB));
        for (const [i, id] of ids.entries()) {
          if (before[i] && after[i]) expect(passed).toContain(id); // held throughout: passes, locks or not
          if (!before[i] && !after[i]) expect(passed).not.toContain(id);
        }
        expect(passed).not.toContain(other); // c's sleeve: not b's to tick
        // No lease row b held throughout was written: not by this fence, nor by b's own ticks meanwhile.
        const now = await versions(ids);
        for (const [i, id] of ids.entries()) if (before[i] && after[i]) expect(now.get(id)).toBe(rows.get(id));
      } finally {
        release();
        await tx;
      }
    },
    30_000,
  );
});

describe.each(['pglite', 'postgresql'] as const)('renewal, restarts and fencing (%s)', (engine) => {
  let p: TestPlatform;
  const rts: SleeveRuntime[] = [];
  const sleeves: string[] = [];
  const start = async (id: string) => {
    const rt = await startRuntime(p, { id, leaseMs: LEASE_MS, reconcileMs: 60_000 });
    rts.push(rt);
    return rt;
  };
  /** Each lease row's version (xmin): a write to the row changes it. */
  const versions = async () =>
    new Map((await p.db.prisma.$queryRaw<{ id: string; v: string }[]>`SELECT "sleeveId" AS id, xmin::text AS v FROM "SleeveLease"`).map((r) => [r.id, r.v]));

  beforeAll(async () => {
    p = await testPlatformOn(engine);
    const stack = await createStack(p, { name: `renew-${engine}` });
    // Event-driven (no timer ticks): every lease write here is the runtimes' own lease work (a tick
    // writes none anyway).
    for (let i = 0; i < N; i++) sleeves.push((await spawnSleeve(p, { stackId: stack.id, kind: 'ai', tickRate: 0, shape: 'B' })).id);
  }, 60_000);
  afterAll(async () => {
    for (const rt of rts) await rt.close().catch(() => {});
    await p?.cleanup();
  });

  it('renewing writes the beat rows only, never a lease', async () => {
    const [a, b] = [await start('rn-a'), await start('rn-b')];
    await until(() => a.running().length === N / 2 && b.running().length === N / 2);
    const before = await versions();
    const rounds = a.stats().rounds + b.stats().rounds;
    await new Promise((r) => setTimeout(r, 3 * LEASE_MS));
    expect(a.stats().rounds + b.stats().rounds - rounds).toBeGreaterThanOrEqual(8);
    expect(await versions()).toEqual(before);
    expect([a.running().length, b.running().length]).toEqual([N / 2, N / 2]);
    for (const s of sleeves) expect([a.id, b.id]).toContain(await liveHolder(p, s));
    const beats = await p.db.prisma.sleeveRuntimeBeat.findMany({ orderBy: { id: 'asc' } });
    expect(beats.map((x) => [x.id, x.held])).toEqual([
      ['rn-a', N / 2],
      ['rn-b', N / 2],
    ]);
  }, 30_000);

  it('a runtime back under the same id after kill -9 takes its sleeves at once; the dead one stays fenced', async () => {
    const [a, b] = rts;
    const mine = a!.running().sort();
    const dead = a!.lease()!;
    await a!.abandon();
    rts.splice(0, 1);
    const t0 = Date.now();
    const back = await start('rn-a'); // its first round has run when start returns
    expect(back.running().sort()).toEqual(mine);
    expect(Date.now() - t0).toBeLessThan(LEASE_MS); // before the dead one's beat would have lapsed
    expect(back.lease()!.gen).toBeGreaterThan(dead.gen);
    // The dead incarnation's ticks are refused, the new one's go through.
    expect(await fencedTicks(p.db, dead, mine)).toEqual([]);
    expect((await fencedTicks(p.db, back.lease()!, mine)).sort()).toEqual(mine);
    expect(b!.running().length).toBe(N / 2);
  }, 30_000);

  it('a second live process under one id: the newer keeps it, the older goes on under another; no sleeve run twice', async () => {
    const a = rts.find((r) => r.id === 'rn-a')!;
    const b = rts.find((r) => r.id === 'rn-b')!;
    const overlaps: string[] = [];
    const sampler = setInterval(() => {
      const seen = new Map<string, number>();
      for (const rt of rts) for (const s of rt.running()) seen.set(s, (seen.get(s) ?? 0) + 1);
      for (const [s, n] of seen) if (n > 1) overlaps.push(s);
    }, 10);
    try {
      const twin = await start('rn-b');
      expect(twin.running().length).toBe(N / 2); // took b's leases at once
      await until(() => b.id.startsWith('rn-b~'), 4 * LEASE_MS);
      await until(() => {
        const held = rts.map((r) => r.running().length).sort();
        return held.join() === [3, 3, 4].join() && new Set(rts.flatMap((r) => r.running())).size === N;
      });
      // Ticks overlap for at most the old one's last round: the fence refuses them in the database.
      for (const s of sleeves) expect([a.id, b.id, twin.id]).toContain(await liveHolder(p, s));
    } finally {
      clearInterval(sampler);
    }
    // The older process stops its sleeves at its next round; until then it may still list them,
    // but their lease names the newer one (checked above), so the database refuses its ticks.
    expect(new Set(overlaps).size).toBeLessThanOrEqual(N / 2);
  }, 30_000);
});

describe('the batch tick on PostgreSQL with statistics from before the runtime held anything', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await testPlatformOn('postgresql');
  }, 60_000);
  afterAll(async () => {
    await p?.cleanup();
  });

  it("reads each sleeve's lease by its key, never every lease of the runtime (a new runtime id is not in the statistics)", async () => {
    const x = (q: string) => p.db.prisma.$executeRawUnsafe(q);
    await x(`INSERT INTO "Sleeve" (id, "stackId", "embodimentType", shape, "tickRate")
      SELECT 'sleeve:human:' || g || ':plan', 'stack:plan', 'human', 'A', 8000 FROM generate_series(1, 4000) g`);
    // ANALYZE while every lease is unheld, then one runtime takes half: its id is unknown to the planner.
    await x('ANALYZE "Sleeve"; ANALYZE "SleeveLease"');
    const h: Holder = { runtime: 'rt-new:123', gen: 7 };
    await x(`INSERT INTO "SleeveRuntimeBeat" (id, gen, held, "expiresAt") VALUES ('rt-new:123', 7, 2000, now() + interval '1 hour')`);
    await x(`UPDATE "SleeveLease" SET runtime = 'rt-new:123', gen = 7 WHERE split_part("sleeveId", ':', 3)::int <= 2000`);
    const ids = Array.from({ length: 300 }, (_, i) => `sleeve:human:${i * 5 + 1}:plan`);
    const plan = (await p.db.prisma.$queryRaw<{ 'QUERY PLAN': string }[]>(sql`EXPLAIN (ANALYZE, COSTS OFF) ${fencedTicksQuery(h, ids)}`))
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toContain('SleeveLease_pkey');
    expect(plan).not.toContain('SleeveLease_runtime');
    expect(plan).not.toMatch(/Seq Scan on "SleeveLease"/);
    // The first 2,000 are held by it: 300 of those asked, every fifth.
    expect(await fencedTicks(p.db, h, ids)).toHaveLength(ids.filter((id) => Number(id.split(':')[2]) <= 2000).length);
  }, 60_000);
});

describe('runtimes by weight (COG_SLEEVE_RUNTIME_WEIGHT)', () => {
  let p: TestPlatform;
  const rts: SleeveRuntime[] = [];
  const sleeves: string[] = [];
  beforeAll(async () => {
    p = await testPlatform();
    const stack = await createStack(p, { name: 'weights' });
    for (let i = 0; i < 12; i++) sleeves.push((await spawnSleeve(p, { stackId: stack.id, kind: 'ai', tickRate: 0, shape: 'B' })).id);
  }, 60_000);
  afterAll(async () => {
    for (const rt of rts) await rt.close().catch(() => {});
    await p?.cleanup();
  });

  it('shares follow the weights; a standby (weight 0) runs nothing until the weighted ones are gone, then all', async () => {
    for (const [id, weight] of [
      ['rt-w1', 1],
      ['rt-w3', 3],
      ['rt-standby', 0],
    ] as const)
      rts.push(await startRuntime(p, { id, weight, leaseMs: LEASE_MS, reconcileMs: 60_000 }));
    const [w1, w3, standby] = rts as [SleeveRuntime, SleeveRuntime, SleeveRuntime];
    const sizes = () => rts.map((r) => r.running().length).join();
    await until(() => sizes() === '3,9,0');
    expect(new Set([...w1.running(), ...w3.running()]).size).toBe(12);
    expect((await p.db.prisma.sleeveRuntimeBeat.findMany({ orderBy: { id: 'asc' } })).map((b) => [b.id, b.weight])).toEqual([
      ['rt-standby', 0],
      ['rt-w1', 1],
      ['rt-w3', 3],
    ]);
    await w1.abandon();
    await w3.abandon();
    await until(() => standby.running().length === 12, 4 * LEASE_MS);
    expect([...standby.running()].sort()).toEqual([...sleeves].sort());
  }, 30_000);
});
