// Perceive throughput and latency through the REST routes over real HTTP (32 concurrent clients),
// against a baseline measured in the same run: raw inserts of the same MemoryNode rows. Twice: on
// embedded PGlite with one stack, and on this machine's PostgreSQL with 32 stacks (one sleeve each),
// where writes to different stacks run in parallel (skipped with a note when it cannot be reached).
//   npx tsx bench/perceive.ts [requests]
// ratio = baseline req/s / REST req/s: what the full perceive (lock, ledger burn, encrypt, DAG write,
// head move, drift, event outbox, HTTP) costs over the bare insert.
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import { memoryTestApp, type MemoryTestApp } from '../test/helpers/memory-app.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';

export interface LatencyStats {
  requests: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

export interface PerceiveBenchResult {
  concurrency: number;
  rest: LatencyStats;
  baseline: LatencyStats;
  /** baseline.reqPerSec / rest.reqPerSec */
  ratio: number;
}

export function percentile(sorted: number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** Runs `total` calls of fn with `concurrency` workers; per-call latency and overall rate. */
export async function measure(total: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<LatencyStats> {
  const lat: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t0 = performance.now();
        await fn(i);
        lat.push(performance.now() - t0);
      }
    }),
  );
  const secs = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 100) / 100;
  return { requests: total, reqPerSec: r(total / secs), p50Ms: r(percentile(lat, 0.5)), p99Ms: r(percentile(lat, 0.99)) };
}

/** Baseline: the same rows (one MemoryNode per perceive, like the stack's) inserted straight into the database. */
async function withBaseline(t: MemoryTestApp, stackId: string, rest: LatencyStats, requests: number, concurrency: number): Promise<PerceiveBenchResult> {
  const sample = await t.p.db.prisma.memoryNode.findFirstOrThrow({ where: { stackId } });
  const baseline = await measure(requests, concurrency, async () => {
    await t.p.db.prisma.memoryNode.create({
      data: {
        cid: `cog://${randomBytes(32).toString('hex')}@0`,
        stackId: 'stack:baseline',
        epoch: 0,
        links: sample.links,
        kind: 'perceive',
        size: sample.size,
      },
    });
  });
  return { concurrency, rest, baseline, ratio: Math.round((baseline.reqPerSec / rest.reqPerSec) * 100) / 100 };
}

export async function runPerceiveBench(opts: { requests?: number; concurrency?: number } = {}): Promise<PerceiveBenchResult> {
  const requests = opts.requests ?? 1000;
  const concurrency = opts.concurrency ?? 32;
  const t = await memoryTestApp();
  try {
    const url = await t.app.listen({ host: '127.0.0.1', port: 0 });
    const stack = await createStack(t.p, { name: 'bench' });
    // Shape B sleeves hold 1000 compute: 2000 perceives each.
    const sleeves = await Promise.all(
      Array.from({ length: Math.ceil(requests / 2000) + 1 }, () => spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' })),
    );
    const rest = await measure(requests, concurrency, async (i) => {
      const res = await fetch(`${url}/v1/perceive`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ stackId: stack.id, sleeveId: sleeves[i % sleeves.length].id, text: `observation ${i}` }),
      });
      if (res.status !== 200) throw new Error(`perceive ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    });
    return await withBaseline(t, stack.id, rest, requests, concurrency);
  } finally {
    await t.close();
  }
}

export function formatPerceiveBench(r: PerceiveBenchResult): string {
  const row = (n: string, s: LatencyStats) =>
    `${n.padEnd(22)} ${String(s.reqPerSec).padStart(9)} req/s  p50 ${String(s.p50Ms).padStart(7)} ms  p99 ${String(s.p99Ms).padStart(7)} ms`;
  return [row('REST perceive', r.rest), row('raw DB insert', r.baseline), `ratio (raw / REST): ${r.ratio}`].join('\n');
}

/** PostgreSQL: `requests` perceives spread over 32 stacks (one Shape B sleeve each), 32 clients. */
export async function runPerceivePostgresBench(opts: { requests?: number; concurrency?: number } = {}): Promise<PerceiveBenchResult> {
  const requests = opts.requests ?? 1500;
  const concurrency = opts.concurrency ?? 32;
  const fresh = await freshDatabase();
  const t = await memoryTestApp({ DATABASE_URL: fresh.url });
  try {
    const url = await t.app.listen({ host: '127.0.0.1', port: 0 });
    const writers: Array<{ stackId: string; sleeveId: string }> = [];
    for (let i = 0; i < concurrency; i++) {
      const stack = await createStack(t.p, { name: `bench-${i}` });
      writers.push({ stackId: stack.id, sleeveId: (await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' })).id });
    }
    const perceive = async (i: number) => {
      const res = await fetch(`${url}/v1/perceive`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...writers[i % writers.length], text: `observation ${i}` }),
      });
      if (res.status !== 200) throw new Error(`perceive ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    };
    await measure(Math.min(200, requests), concurrency, perceive); // warm-up: connections, JIT
    const rest = await measure(requests, concurrency, perceive);
    return await withBaseline(t, writers[0]!.stackId, rest, requests, concurrency);
  } finally {
    await t.close();
    await fresh.drop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const requests = Number(process.argv[2]) || undefined;
  const r = await runPerceiveBench({ requests });
  console.log(`perceive at ${r.concurrency} concurrent clients, one stack (PGlite in memory, Node ${process.version})`);
  console.log(formatPerceiveBench(r));
  try {
    const pg = await runPerceivePostgresBench({ requests });
    console.log(`\nperceive at ${pg.concurrency} concurrent clients over ${pg.concurrency} stacks (PostgreSQL)`);
    console.log(formatPerceiveBench(pg));
  } catch (e) {
    console.log(`\nPostgreSQL run skipped: ${(e as Error).message}`);
  }
  process.exit(0);
}
