// The sleeve runtime: identity endpoints, tick loops per kind, frozen sleeves, crash reporting,
// pin maintenance (shard-loss), and clean shutdown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestApp, type MemoryTestApp } from '../../../test/helpers/memory-app.ts';
import { startEventRelay } from '../../../lib/events.ts';
import { decommissionSleeve, freezeSleeve, spawnSleeve, unfreezeSleeve } from '../sleeves.ts';
import { createStack } from '../../stacks/stacks.ts';
import { remember } from '../../../flows/memory.ts';
import { payloadKey, parseCid } from '../../memory/hippocampus/cid.ts';
import { startRuntime, tickPhase, type SleeveRuntime } from './runtime.ts';
import { identityUrl } from '../view.ts';

let t: MemoryTestApp;
let relay: ReturnType<typeof startEventRelay>;
let rt: SleeveRuntime;
/** Each sleeve's tick, as the batch events carry them (with the event's ts and runtime). */
const ticks: Array<Record<string, unknown>> = [];
const events: Array<Record<string, unknown>> = [];
beforeAll(async () => {
  t = await memoryTestApp();
  relay = startEventRelay(t.p, { pollMs: 20 });
  await t.p.bus.subscribe({ subjects: ['cog.sleeve.tick'] }, (d) => {
    events.push(d.data);
    for (const s of d.data.sleeves as Array<Record<string, unknown>>) ticks.push({ ...s, ts: d.data.ts, runtime: d.data.runtime });
  });
});
afterAll(async () => {
  await rt?.close();
  await relay?.close();
  await t?.close();
});

const until = async (cond: () => Promise<boolean> | boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};
const row = (id: string) => t.p.db.prisma.sleeve.findUniqueOrThrow({ where: { id } });

describe('sleeve runtime', () => {
  it("serves each sleeve's identity on the one listener, ticks at the rate, pauses frozen sleeves, stops dead ones", async () => {
    const stack = await createStack(t.p, { name: 'rt' });
    const early = await spawnSleeve(t.p, { stackId: stack.id, embodimentType: 'human', hostname: 'h1', shape: 'A' });
    rt = await startRuntime(t.p, { reconcileMs: 60_000 });
    expect(rt.running()).toContain(early.id); // picked up from the database at start
    const ai = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', tickRate: 100, shape: 'B' });
    await until(() => rt.running().includes(ai.id)); // picked up from the bus
    const leaseVersion = async () =>
      (await t.p.db.prisma.$queryRaw<{ v: string }[]>`SELECT xmin::text AS v FROM "SleeveLease" WHERE "sleeveId" = ${ai.id}`)[0]!.v;
    const leased = await leaseVersion();
    const port = (await row(ai.id)).identityPort!;
    expect(port).toBe(rt.port);
    const id = await fetch(identityUrl(ai.id, port)).then((r) => r.json());
    expect(id).toMatchObject({ sleeveId: ai.id, kind: 'ai', stackId: stack.id });
    expect(typeof (id as { hostname: unknown }).hostname).toBe('string');
    const earlyId = await fetch(identityUrl(early.id, (await row(early.id)).identityPort!)).then((r) => r.json());
    expect(earlyId).toMatchObject({ sleeveId: early.id, kind: 'human', hostname: 'h1' });

    await until(() => ticks.filter((x) => x.sleeveId === ai.id && x.ok).length >= 2);
    // One event per batch of ticks, naming the runtime; each tick with its sleeve, stack, kind and outcome.
    expect(events[0]).toMatchObject({ type: 'sleeve.tick', runtime: rt.id });
    expect(ticks.find((x) => x.sleeveId === ai.id)).toEqual({
      sleeveId: ai.id,
      stackId: stack.id,
      kind: 'ai',
      ok: true,
      ts: expect.any(Number),
      runtime: rt.id,
    });
    const before = await row(ai.id);
    expect(await leaseVersion()).toBe(leased); // a tick writes no row: its fence is a read
    expect(before.driftMilli).toBe(0); // a tick never changes drift or spends tokens

    await t.p.db.prisma.$transaction((tx) => freezeSleeve(tx, ai.id));
    await until(async () => (await rt.tick(ai.id)) === false);
    const frozenAt = ticks.filter((x) => x.sleeveId === ai.id).length;
    await new Promise((r) => setTimeout(r, 300));
    expect(ticks.filter((x) => x.sleeveId === ai.id).length).toBe(frozenAt);
    await t.p.db.prisma.$transaction((tx) => unfreezeSleeve(tx, ai.id));
    await until(() => ticks.filter((x) => x.sleeveId === ai.id).length > frozenAt);

    await decommissionSleeve(t.p, ai.id, 'test');
    await until(() => !rt.running().includes(ai.id));
    expect((await fetch(identityUrl(ai.id, port))).status).toBe(404); // the listener serves the sleeves it runs
    expect((await row(ai.id)).identityPort).toBeNull();
  });

  it('a crashing tick is reported and the loop continues; mining ticks on blocks', async () => {
    const stack = await createStack(t.p, { name: 'rt2' });
    let calls = 0;
    rt.onTick('ai', () => {
      calls++;
      if (calls === 1) throw new Error('boom');
    });
    const ai = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', tickRate: 100, shape: 'B' });
    await until(() => calls >= 3);
    expect(ticks.some((x) => x.sleeveId === ai.id && x.ok === false && x.error === 'boom')).toBe(true);
    expect(rt.stats().failures).toBeGreaterThanOrEqual(1);
    const miner = await spawnSleeve(t.p, { stackId: stack.id, kind: 'mining', shape: 'B' });
    await until(() => rt.running().includes(miner.id));
    await t.p.bus.publish('cog.block.mined', { type: 'block.mined', height: 1 });
    await until(() => ticks.some((x) => x.sleeveId === miner.id && x.ok));
    await decommissionSleeve(t.p, ai.id, 'test');
  });

  it('memory sleeves check pinned shards once per epoch and open shard-loss for a lost one', async () => {
    t.p.setEpoch(1);
    const stack = await createStack(t.p, { name: 'rt3' });
    const mem = await spawnSleeve(t.p, { stackId: stack.id, embodimentType: 'memory', shape: 'A' });
    await until(() => rt.running().includes(mem.id));
    const { cid } = await remember(t.p, { sleeveId: mem.id, text: 'precious', pin: true });
    t.p.setEpoch(2);
    await until(() => ticks.some((x) => x.sleeveId === mem.id && x.ok));
    expect(await t.p.db.prisma.residue.count({ where: { stackId: stack.id, kind: 'shard-loss' } })).toBe(0);
    // Lost: the payload is in its index row (a remember's), and in no object either.
    await t.p.db.prisma.memoryNode.update({ where: { cid }, data: { payload: null } });
    await t.p.objects.delete(payloadKey(parseCid(cid)!.hash));
    t.p.setEpoch(3);
    await until(async () => (await t.p.db.prisma.residue.count({ where: { stackId: stack.id, kind: 'shard-loss' } })) === 1);
  });

  it('close stops the identity listener and hands the leases back', async () => {
    const held = (await t.p.db.prisma.sleeve.findMany({ where: { alive: true, identityPort: { not: null } } })).map((r) => [r.id, r.identityPort!] as const);
    expect(held.length).toBeGreaterThan(0);
    await rt.close();
    for (const [id, port] of held) await expect(fetch(identityUrl(id, port))).rejects.toThrow();
    expect(await t.p.db.prisma.sleeve.count({ where: { alive: true, identityPort: { not: null } } })).toBe(0);
    expect(await t.p.db.prisma.sleeveLease.count({ where: { runtime: { not: '' } } })).toBe(0);
  });

  it("keeps each sleeve's cadence while the rows are re-read (reconcile passes, sleeve events)", async () => {
    // Reconciling every 50 ms and a sleeve event every 40 ms: a timer restarted on every re-read
    // would never reach a 300 ms tick.
    rt = await startRuntime(t.p, { reconcileMs: 50 });
    const stack = await createStack(t.p, { name: 'rt4' });
    const ai = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', tickRate: 300, shape: 'B' });
    await until(() => rt.running().includes(ai.id));
    const noise = setInterval(() => void t.p.bus.publish(`cog.sleeve.changed.${stack.id}`, { type: 'sleeve.changed', sleeveId: ai.id }).catch(() => {}), 40);
    try {
      await until(() => ticks.filter((x) => x.sleeveId === ai.id && x.ok).length >= 4, 8000);
    } finally {
      clearInterval(noise);
    }
    const ts = ticks.filter((x) => x.sleeveId === ai.id && x.ok).map((x) => x.ts as number);
    // Never faster than the rate: the k-th tick comes at least k × 300 ms after the first (less timer slack).
    for (let k = 1; k < ts.length; k++) expect(ts[k]! - ts[0]!, `tick ${k}`).toBeGreaterThanOrEqual(k * 300 - 30);
    // On the sleeve's own grid (its phase is a function of its id, the same in any runtime that takes
    // it over): the ticks start just after a grid point; the median of how long after, well inside
    // the period (a tick starts late only when the process is busy).
    const after = ts.map((x) => (((x - tickPhase(ai.id, 300)) % 300) + 300) % 300).sort((a, b) => a - b);
    expect(after[Math.floor(after.length / 2)]!).toBeLessThan(100);
  });

  it('a change whose event was missed is found by the next re-read, which reads only the rows whose running changed', async () => {
    await rt.close();
    rt = await startRuntime(t.p, { reconcileMs: 60_000 });
    const stack = await createStack(t.p, { name: 'rt5' });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', tickRate: 100, shape: 'B' })).id);
    await until(() => ids.every((id) => rt.running().includes(id)));
    await rt.reconcile(); // the first re-read: every sleeve held
    const first = rt.stats().reread;
    expect(first).toBeGreaterThanOrEqual(3);
    await rt.reconcile();
    expect(rt.stats().reread).toBe(first); // nothing changed: no row read
    // Written past the domain (no event): one sleeve frozen, another's drift moved (not its running).
    await t.p.db.prisma.sleeve.update({ where: { id: ids[0]! }, data: { frozen: true } });
    await t.p.db.prisma.sleeve.update({ where: { id: ids[1]! }, data: { driftMilli: 5 } });
    expect(await rt.tick(ids[0]!)).toBe(false); // the fence reads the row: frozen, no tick
    await rt.reconcile();
    expect(rt.stats().reread).toBe(first + 1); // only the frozen one
    const before = ticks.filter((x) => x.sleeveId === ids[0]).length;
    await new Promise((r) => setTimeout(r, 400));
    expect(ticks.filter((x) => x.sleeveId === ids[0]).length).toBe(before); // its timer stopped
    expect(ticks.filter((x) => x.sleeveId === ids[2]).length).toBeGreaterThan(0);
    // Unfrozen past the domain too: the next re-read starts it again.
    await t.p.db.prisma.sleeve.update({ where: { id: ids[0]! }, data: { frozen: false } });
    await rt.reconcile();
    await until(() => ticks.filter((x) => x.sleeveId === ids[0]).length > before);
  });

  it("a sleeve's phase: a function of its id within the period, spread across sleeves", () => {
    expect(tickPhase('sleeve:ai:1:abc', 8000)).toBe(tickPhase('sleeve:ai:1:abc', 8000));
    const phases = Array.from({ length: 1000 }, (_, i) => tickPhase(`sleeve:human:${i}:x`, 8000));
    for (const ph of phases) expect(ph >= 0 && ph < 8000 && Number.isInteger(ph)).toBe(true);
    // Spread: every eighth of the period holds some of a thousand sleeves' ticks (none crowded into one).
    const eighths = new Array(8).fill(0);
    for (const ph of phases) eighths[Math.floor(ph / 1000)]++;
    for (const n of eighths) expect(n).toBeGreaterThan(80);
  });
});
