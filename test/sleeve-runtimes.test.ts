// Sleeves across runtime processes, end to end: a sleeve runtime in a child process and one in this
// process share the sleeves of one PostgreSQL database; the child is killed with -9 and its sleeves
// run (tick, answer their identityUrl) in this process within two lease periods. The lease is one
// epoch in production (docs/scale.md); here 1 s.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatformOn, type TestPlatform } from './helpers/platform.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { getSleeveView, spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { startRuntime, type SleeveRuntime } from '../subgraphs/sleeves/runtime/runtime.ts';

const LEASE_MS = 1000;
const N = 8;

const until = async (cond: () => Promise<boolean> | boolean, ms = 15_000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

let p: TestPlatform;
let child: ChildProcess | undefined;
let local: SleeveRuntime | undefined;
const sleeves: string[] = [];

beforeAll(async () => {
  p = await testPlatformOn('postgresql');
  const stack = await createStack(p, { name: 'procs' });
  for (let i = 0; i < N; i++) sleeves.push((await spawnSleeve(p, { stackId: stack.id, kind: 'ai', tickRate: 100, shape: 'B' })).id);
}, 60_000);
afterAll(async () => {
  child?.kill('SIGKILL');
  await local?.close().catch(() => {});
  await p?.cleanup();
});

/** The leases `runtime` holds now: naming it at its generation, its beat live. */
const held = async (runtime: string) =>
  (
    await p.db.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM "SleeveLease" l
      JOIN "SleeveRuntimeBeat" b ON b.id = l.runtime AND b.gen = l.gen AND b."expiresAt" > now() WHERE l.runtime = ${runtime}`
  )[0]!.n;

describe('sleeve runtimes in two processes', () => {
  it('share the sleeves; after kill -9 of one, the other runs them all within two lease periods', async () => {
    child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'helpers', 'sleeve-runtime-child.ts')], {
      env: { ...process.env, DATABASE_URL: p.config.databaseUrl, RUNTIME_ID: 'rt-child', LEASE_MS: String(LEASE_MS) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // The child's first line says it runs; then a line per tick event, with the sleeves it ticked.
    const childTicks: Array<{ at: number; ids: string[] }> = [];
    const lines = readline.createInterface({ input: child!.stdout! });
    lines.on('line', (l) => {
      const m = JSON.parse(l) as { ticked?: string[] };
      if (m.ticked) childTicks.push({ at: Date.now(), ids: m.ticked });
    });
    // This process's runtime reports its ticks on this process's bus.
    const localTicks: Array<{ at: number; ids: string[] }> = [];
    await p.bus.subscribe(
      { subjects: ['cog.sleeve.tick'] },
      (d) =>
        void localTicks.push({ at: Date.now(), ids: (d.data.sleeves as Array<{ sleeveId: string; ok: boolean }>).filter((x) => x.ok).map((x) => x.sleeveId) }),
    );
    const tickedSince = (log: typeof localTicks, since: number) => new Set(log.filter((e) => e.at > since).flatMap((e) => e.ids));
    const ready = await new Promise<{ port: number; pid: number }>((resolve, reject) => {
      lines.once('line', (l) => resolve(JSON.parse(l)));
      child!.once('exit', (code) => reject(new Error(`child exited ${code}`)));
    });
    await until(async () => (await held('rt-child')) === N);
    local = await startRuntime(p, { id: 'rt-parent', leaseMs: LEASE_MS, reconcileMs: 60_000 });
    await until(async () => (await held('rt-child')) === N / 2 && local!.running().length === N / 2);

    // Each sleeve's identityUrl answers from the process that runs it.
    const inChild = sleeves.filter((s) => !local!.running().includes(s));
    expect(inChild.length).toBe(N / 2);
    for (const s of sleeves) {
      const v = await getSleeveView(p, s);
      expect(v.identityUrl).toBe(`http://127.0.0.1:${inChild.includes(s) ? ready.port : local.port}/sleeves/${encodeURIComponent(s)}/identity`);
      expect(await fetch(v.identityUrl!).then((r) => r.json())).toMatchObject({ sleeveId: s, kind: 'ai', stackId: v.stackId });
    }
    // The child ticks its sleeves, and only this process ticks the others.
    const since = Date.now();
    await until(() => inChild.every((s) => tickedSince(childTicks, since).has(s)));
    await until(() => sleeves.filter((s) => !inChild.includes(s)).every((s) => tickedSince(localTicks, since).has(s)));
    for (const s of inChild) expect(tickedSince(localTicks, since).has(s)).toBe(false);
    for (const s of sleeves.filter((x) => !inChild.includes(x))) expect(tickedSince(childTicks, since).has(s)).toBe(false);

    process.kill(ready.pid, 'SIGKILL');
    const t0 = Date.now();
    await until(() => local!.running().length === N, 4 * LEASE_MS);
    const took = Date.now() - t0;
    console.log(`kill -9: ${N / 2} sleeves handed over in ${took} ms (lease ${LEASE_MS} ms)`);
    expect(took).toBeLessThanOrEqual(2 * LEASE_MS);
    const after = Date.now();
    await until(() => inChild.every((s) => tickedSince(localTicks, after).has(s)));
    for (const s of inChild) {
      const v = await getSleeveView(p, s);
      expect(v.identityUrl).toBe(`http://127.0.0.1:${local.port}/sleeves/${encodeURIComponent(s)}/identity`);
      expect(await fetch(v.identityUrl!).then((r) => r.json())).toMatchObject({ sleeveId: s });
    }
    expect(await p.db.prisma.sleeveLease.count({ where: { runtime: 'rt-child' } })).toBe(0);
  }, 60_000);
});
