// Perceive and remember on the whole running platform (`cog start`, as `npm start` starts it: epochs
// of 1 s, the worker runner, sleeve ticks and the Cortex outbox all running), driven over HTTP from
// this separate process, against a baseline measured in the same run: raw inserts of rows of the
// same size (one MemoryNode per write) into the same database.
//   * PostgreSQL (a fresh database on this machine's server): 32 clients over 32 stacks (one Shape B
//     sleeve each writing at a time: a long run gives a stack a sleeve per 1,500 writes, used one
//     after another); the baseline is 32 plain connections inserting into that database, measured in
//     five windows that alternate with five of the REST load (each path its own), so both see the
//     same machine: a shared machine's speed drifts over tens of seconds.
//   * embedded PGlite: 32 clients on one stack, its sleeves (one per 1,500 writes) in turn, so each
//     write is a shadow branch (another sleeve moved the head); the baseline inserts into the platform's own
//     database directory after the platform stopped (PGlite is one process's), 32 concurrent callers.
//   npx tsx bench/perceive.ts [requests] [--only=pg|embedded] [--profile=DIR] [--path=perceive|remember|both]
// --profile loads bench/cpu-profile.mjs into the platform and profiles each measured window (SIGUSR2
// on and off), leaving one .cpuprofile per window in DIR (summary: bench/profile-summary.ts); on
// PostgreSQL the profile spans the alternating windows, the raw ones included (the platform idles),
// and DIR/<path>-rest-windows.json holds the REST windows' times (profile-summary --windows).
// Each row also gives the CPU a request per side (the platform's process, PostgreSQL's, the client);
// on the raw row the platform's figure is what its background (epochs, mining, ticks) spent meanwhile.
// Under the REST row, the platform's main thread (its event loop): the share of the windows it ran
// and the share it waited for a core while it had work (Linux's schedstat).
// ratio = REST req/s / raw req/s (the issue's targets: >= 0.5 on PostgreSQL, >= 0.25 embedded).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { startCluster, type Cluster } from '../test/helpers/cluster.ts';
import { cpuMsByPid, cpuMsOf, cpuMsSince, schedMsOf } from './proc-cpu.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { loadConfig } from '../lib/config.ts';
import { pgliteOptions } from '../lib/db/index.ts';

/** Port shift of the platforms this bench starts (below the ephemeral range; no test uses it). */
export const BENCH_SHIFT = 36_000;

/**
 * The platform's log level in the benches that start it (perceive, recall, load): info, a line a
 * request, as `npm start` and `cog up` run it; BENCH_LOG_LEVEL=warn leaves the lines out.
 */
export const BENCH_LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'info';

export interface LatencyStats {
  requests: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU a request in the window (ms), where /proc tells: the platform's process, the database's processes, this client. */
  cpuMs?: { platform?: number; database?: number; client: number };
  /** The platform's main thread (its event loop) over the windows: the share of the time it ran, and it waited for a core while it had work. */
  mainThread?: { ran: number; waited: number };
}

export interface PerceiveBenchResult {
  label: string;
  path: 'perceive' | 'remember';
  concurrency: number;
  rest: LatencyStats;
  baseline: LatencyStats;
  /** rest.reqPerSec / baseline.reqPerSec */
  ratio: number;
}

export function percentile(sorted: number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** One measured window: each call's latency, the window's length, and the CPU spent in it per side (ms). */
interface Window {
  lat: number[];
  ms: number;
  cpu?: { platform?: number; database?: number; client: number };
  sched?: { runMs: number; waitMs: number };
}

/** What CPU a window reads besides this client's: the platform's process (by pid), PostgreSQL's processes (not when embedded: PGlite is in the platform). */
interface CpuSides {
  platformPid?: number;
  postgres?: boolean;
}

/** Runs `total` calls of fn with `concurrency` workers; with `cpu`, also the CPU spent meanwhile (`/proc`). */
async function runWindow(total: number, concurrency: number, fn: (i: number) => Promise<void>, cpu?: CpuSides): Promise<Window> {
  const before = cpu
    ? {
        platform: cpu.platformPid ? cpuMsOf(cpu.platformPid) : undefined,
        sched: cpu.platformPid ? schedMsOf(cpu.platformPid) : undefined,
        database: cpu.postgres ? cpuMsByPid('postgres') : undefined,
        client: process.cpuUsage(),
      }
    : undefined;
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
  const ms = performance.now() - start;
  if (!before) return { lat, ms };
  const platformAfter = cpu?.platformPid ? cpuMsOf(cpu.platformPid) : undefined;
  const schedAfter = cpu?.platformPid ? schedMsOf(cpu.platformPid) : undefined;
  const client = process.cpuUsage(before.client);
  return {
    lat,
    ms,
    ...(before.sched && schedAfter ? { sched: { runMs: schedAfter.runMs - before.sched.runMs, waitMs: schedAfter.waitMs - before.sched.waitMs } } : {}),
    cpu: {
      platform: before.platform !== undefined && platformAfter !== undefined ? platformAfter - before.platform : undefined,
      database: before.database ? cpuMsSince(before.database, 'postgres') : undefined,
      client: (client.user + client.system) / 1000,
    },
  };
}

/** The windows pooled: rate over their summed length, percentiles over every call, CPU a request. */
function statsOf(windows: readonly Window[]): LatencyStats {
  const lat = windows.flatMap((w) => w.lat).sort((a, b) => a - b);
  const secs = windows.reduce((t, w) => t + w.ms, 0) / 1000;
  const r = (x: number) => Math.round(x * 100) / 100;
  const per = (ms: number) => Math.round((ms * 1000) / lat.length) / 1000;
  const sum = (f: (c: NonNullable<Window['cpu']>) => number | undefined) => {
    let t = 0;
    for (const w of windows) {
      const v = w.cpu ? f(w.cpu) : undefined;
      if (v === undefined) return undefined;
      t += v;
    }
    return t;
  };
  const platform = sum((c) => c.platform);
  const database = sum((c) => c.database);
  const client = sum((c) => c.client);
  const sched = windows.every((w) => w.sched)
    ? { ran: windows.reduce((t, w) => t + w.sched!.runMs, 0) / (secs * 1000), waited: windows.reduce((t, w) => t + w.sched!.waitMs, 0) / (secs * 1000) }
    : undefined;
  return {
    requests: lat.length,
    reqPerSec: r(lat.length / secs),
    p50Ms: r(percentile(lat, 0.5)),
    p99Ms: r(percentile(lat, 0.99)),
    ...(sched ? { mainThread: { ran: r(sched.ran), waited: r(sched.waited) } } : {}),
    ...(client !== undefined
      ? {
          cpuMs: {
            platform: platform === undefined ? undefined : per(platform),
            database: database === undefined ? undefined : per(database),
            client: per(client),
          },
        }
      : {}),
  };
}

/** Runs `total` calls of fn with `concurrency` workers; per-call latency and overall rate. */
export async function measure(total: number, concurrency: number, fn: (i: number) => Promise<void>, cpu?: CpuSides): Promise<LatencyStats> {
  return statsOf([await runWindow(total, concurrency, fn, cpu)]);
}

const ratioOf = (rest: LatencyStats, baseline: LatencyStats) => Math.round((rest.reqPerSec / baseline.reqPerSec) * 1000) / 1000;

/**
 * The clients' POST: node:http over a keep-alive agent (one socket per client), not fetch. The load
 * generator shares this 2-core machine with the platform and the database; fetch (undici through
 * its web streams) spent 1.06 ms of CPU a perceive here, the node:http client 0.37 ms, and that CPU
 * came out of the platform's share.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function post(url: string, body: unknown): Promise<Record<string, unknown>> {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': data.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if ((res.statusCode ?? 0) >= 300) reject(new Error(`${res.statusCode}: ${text.slice(0, 300)}`));
        else resolve(JSON.parse(text) as Record<string, unknown>);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

interface Writer {
  stackId: string;
  sleeveId: string;
}

/** Writes a sleeve makes before its stack's next sleeve takes over (of the 2000 its compute pays for). */
const WRITES_PER_SLEEVE = 1500;

/** `stacks` stacks with `sleevesPer` Shape B sleeves each (1000 compute: 2000 writes a sleeve), a stack's sleeves together. */
async function writers(gateway: string, stacks: number, sleevesPer: number): Promise<Writer[]> {
  const out: Writer[] = [];
  for (let i = 0; i < stacks; i++) {
    const stack = await post(`${gateway}/v1/stacks`, { name: `bench-${i}` });
    for (let j = 0; j < sleevesPer; j++) {
      const sleeve = await post(`${gateway}/v1/sleeves/${encodeURIComponent(String(stack.id))}`, { kind: 'ai' });
      out.push({ stackId: String(stack.id), sleeveId: String(sleeve.id) });
    }
  }
  return out;
}

const TEXT = (i: number) => `observation ${i}: the light moved across the wall`;

/**
 * The call of one path, for all its windows. With `stacks`, each stack writes with one sleeve at a
 * time (the next once it made WRITES_PER_SLEEVE), counted over the windows, so the writes are
 * plain ones: rotating over a stack's sleeves made each a shadow branch (another sleeve had moved
 * the head), and the reconciler's residues a Cortex transaction each. Without, the writers rotate
 * (the embedded bench's many sleeves on one stack).
 */
function writeCall(gateway: string, kind: 'perceive' | 'remember', ws: Writer[], stacks?: number) {
  let made = 0;
  const per = stacks ? ws.length / stacks : 0;
  return async (i: number) => {
    const n = made++;
    let w = ws[i % ws.length]!;
    if (stacks) {
      // The nth call writes to stack n % stacks; that stack's own count picks its sleeve.
      const sleeve = Math.min(per - 1, Math.floor(Math.floor(n / stacks) / WRITES_PER_SLEEVE));
      w = ws[(n % stacks) * per + sleeve]!;
    }
    if (kind === 'perceive') await post(`${gateway}/v1/perceive`, { ...w, text: TEXT(i) });
    else await post(`${gateway}/v1/sleeves/${encodeURIComponent(w.sleeveId)}/remember`, { text: TEXT(i) });
  };
}

/** What a write's row holds besides its keys: the payload's size column and its stored payload (ciphertext text). */
interface RowShape {
  size: number;
  /** Length of the payload text stored with the row (0: a node whose payload is an object, not in the row). */
  payload: number;
}

/** A row like the ones a write adds: a 64-hex CID linking to the previous one, the payload's size, and a payload as long as a write's. */
function rawRow(i: number, shape: RowShape): unknown[] {
  const payload = shape.payload
    ? randomBytes(Math.ceil(shape.payload / 2))
        .toString('hex')
        .slice(0, shape.payload)
    : null;
  return [
    `cog://${randomBytes(32).toString('hex')}@${i}`,
    'stack:baseline',
    1,
    [`cog://${randomBytes(32).toString('hex')}@1`],
    'perceive',
    shape.size,
    payload,
  ];
}
const RAW_INSERT = `INSERT INTO "MemoryNode" (cid, "stackId", epoch, links, kind, size, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)`;

async function sampleShape(q: (sql: string) => Promise<Array<{ size: number; payload: number | null }>>): Promise<RowShape> {
  const rows = await q(`SELECT size, length(payload) AS payload FROM "MemoryNode" WHERE "stackId" <> 'stack:baseline' LIMIT 1`);
  return { size: rows[0]?.size ?? 200, payload: Number(rows[0]?.payload ?? 0) };
}

interface Platform {
  cluster: Cluster;
  dataDir: string;
}

async function startPlatform(env: Record<string, string>, profileDir?: string): Promise<Platform> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-bench-perceive-'));
  const cluster = await startCluster({
    mode: 'embedded',
    shift: BENCH_SHIFT,
    env: {
      COG_DATA_DIR: dataDir,
      COG_EPOCH_INTERVAL_MS: '1000',
      LOG_LEVEL: BENCH_LOG_LEVEL,
      // Every write adds drift; at 2 x COG_DRIFT_MAX the desync pass decommissions the sleeve. An
      // agent syncs now and then; the bench measures writes only, so the limit is out of reach.
      COG_DRIFT_MAX: '1000000',
      ...(profileDir
        ? {
            NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(path.join(import.meta.dirname, 'cpu-profile.mjs')).href}`.trim(),
            COG_CPU_PROFILE_DIR: profileDir,
          }
        : {}),
      ...env,
    },
  });
  await cluster.waitHealthy(180_000, ['gateway']);
  return { cluster, dataDir };
}

/** Runs fn with the platform's CPU profiler on (when profiling): one .cpuprofile for the window. */
async function profiled<T>(plat: Platform, profileDir: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (!profileDir) return fn();
  const before = fs.readdirSync(profileDir).length;
  process.kill(plat.cluster.pid, 'SIGUSR2');
  await new Promise((r) => setTimeout(r, 200));
  try {
    return await fn();
  } finally {
    process.kill(plat.cluster.pid, 'SIGUSR2');
    for (let i = 0; i < 1800 && fs.readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile')).length <= before; i++)
      await new Promise((r) => setTimeout(r, 100));
  }
}

/** Calls before a path's measured windows (and raw inserts before the first raw window); --warm-up=N. */
let WARM_UP = 3_000;

/** Alternating windows of each kind in a PostgreSQL run. */
const ROUNDS = 5;

/** PostgreSQL: 32 clients over 32 stacks, and 32 connections inserting raw rows into the same database, in alternating windows. */
export async function runPostgres(o: { requests: number; paths: Array<'perceive' | 'remember'>; profileDir?: string }): Promise<PerceiveBenchResult[]> {
  const concurrency = 32;
  const fresh = await freshDatabase();
  const plat = await startPlatform({ DATABASE_URL: fresh.url, DATABASE_POOL_SIZE: '20' }, o.profileDir);
  const pool = new pg.Pool({ connectionString: fresh.url, max: concurrency });
  try {
    const gw = plat.cluster.gateway;
    const out: PerceiveBenchResult[] = [];
    let shape: RowShape | undefined;
    for (const kind of o.paths) {
      const ws = await writers(gw, concurrency, Math.ceil((o.requests + WARM_UP) / concurrency / WRITES_PER_SLEEVE));
      const call = writeCall(gw, kind, ws, concurrency);
      // Warm-up, a few seconds' worth: connections, JIT (the platform's, PGlite's and Prisma's wasm,
      // this client's), PostgreSQL's per-backend caches. With 300 requests the first path measured
      // paid for it, the raw inserts between its windows too (CPU a request up to 1.6x the second's).
      await measure(Math.min(WARM_UP, o.requests), concurrency, call);
      if (!shape) {
        shape = await sampleShape(async (sql) => (await pool.query(sql)).rows);
        console.log(`baseline rows: size ${shape.size}, payload ${shape.payload} characters (a write's, sampled)`);
        await measure(WARM_UP, concurrency, (i) => pool.query(RAW_INSERT, rawRow(i, shape!)).then(() => {})); // warm-up
      }
      // The REST windows and the raw ones alternate, ROUNDS of each: this machine's speed drifts
      // over tens of seconds (the same code's rate moved by a third between back-to-back runs), and
      // alternating windows see the same drift.
      const rest: Window[] = [];
      const raw: Window[] = [];
      const per = Math.ceil(o.requests / ROUNDS);
      const sides: CpuSides = { platformPid: plat.cluster.pid, postgres: true };
      // The REST windows' times on the monotonic clock (the profile's), for profile-summary --windows.
      const restTimes: Array<[number, number]> = [];
      const nowUs = () => Number(process.hrtime.bigint() / 1000n);
      await profiled(plat, o.profileDir, async () => {
        for (let r = 0; r < ROUNDS; r++) {
          const t0 = nowUs();
          rest.push(await runWindow(per, concurrency, call, sides));
          restTimes.push([t0, nowUs()]);
          raw.push(await runWindow(per, concurrency, (i) => pool.query(RAW_INSERT, rawRow(i, shape!)).then(() => {}), sides));
        }
      });
      if (o.profileDir) fs.writeFileSync(path.join(o.profileDir, `${kind}-rest-windows.json`), JSON.stringify(restTimes));
      const restStats = statsOf(rest);
      const baseline = statsOf(raw);
      out.push({
        label: `${concurrency} clients over ${concurrency} stacks, PostgreSQL, ${ROUNDS} alternating windows`,
        path: kind,
        concurrency,
        rest: restStats,
        baseline,
        ratio: ratioOf(restStats, baseline),
      });
    }
    return out;
  } finally {
    await pool.end();
    await plat.cluster.stop();
    fs.rmSync(plat.dataDir, { recursive: true, force: true });
    await fresh.drop();
  }
}

/** Embedded: 32 clients on one stack; the baseline inserts into the platform's PGlite directory once it stopped. */
export async function runEmbedded(o: { requests: number; paths: Array<'perceive' | 'remember'>; profileDir?: string }): Promise<PerceiveBenchResult[]> {
  const concurrency = 32;
  const plat = await startPlatform({}, o.profileDir);
  let stopped = false;
  try {
    const gw = plat.cluster.gateway;
    const results: Array<{ path: 'perceive' | 'remember'; rest: LatencyStats }> = [];
    for (const kind of o.paths) {
      const ws = await writers(gw, 1, Math.ceil((o.requests + WARM_UP) / WRITES_PER_SLEEVE) + 1);
      await measure(Math.min(WARM_UP, o.requests), concurrency, writeCall(gw, kind, ws)); // warm-up, as on PostgreSQL
      results.push({
        path: kind,
        rest: await profiled(plat, o.profileDir, () => measure(o.requests, concurrency, writeCall(gw, kind, ws), { platformPid: plat.cluster.pid })),
      });
    }
    // The same database: the platform's PGlite directory, opened here once the platform let go of it.
    const keep = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-bench-pglite-'));
    fs.cpSync(path.join(plat.dataDir, 'db'), path.join(keep, 'db'), { recursive: true });
    await plat.cluster.stop();
    stopped = true;
    fs.rmSync(path.join(keep, 'db', 'postmaster.pid'), { force: true });
    const { PGlite } = await import('@electric-sql/pglite');
    // With the platform's shared buffers (PGLITE_SHARED_BUFFERS_MB), so both sides run one engine setup.
    const lite = await PGlite.create(path.join(keep, 'db'), pgliteOptions(PGlite, loadConfig(process.env).pgliteSharedBuffersMb));
    try {
      const shape = await sampleShape(async (sql) => (await lite.query<{ size: number; payload: number | null }>(sql)).rows);
      await measure(WARM_UP, concurrency, (i) => lite.query(RAW_INSERT, rawRow(i, shape)).then(() => {}));
      const baseline = await measure(o.requests, concurrency, (i) => lite.query(RAW_INSERT, rawRow(i, shape)).then(() => {}), {});
      return results.map((r) => ({
        label: `${concurrency} clients, one stack, embedded PGlite`,
        path: r.path,
        concurrency,
        rest: r.rest,
        baseline,
        ratio: ratioOf(r.rest, baseline),
      }));
    } finally {
      await lite.close();
      fs.rmSync(keep, { recursive: true, force: true });
    }
  } finally {
    if (!stopped) await plat.cluster.stop();
    fs.rmSync(plat.dataDir, { recursive: true, force: true });
  }
}

export function formatPerceiveBench(r: PerceiveBenchResult): string {
  const cpu = (s: LatencyStats) =>
    s.cpuMs
      ? `  CPU a request: ${s.cpuMs.platform !== undefined ? `platform ${s.cpuMs.platform} ms, ` : ''}${s.cpuMs.database !== undefined ? `database ${s.cpuMs.database} ms, ` : ''}client ${s.cpuMs.client} ms`
      : '';
  const row = (n: string, s: LatencyStats) =>
    `${n.padEnd(22)} ${String(s.reqPerSec).padStart(9)} req/s  p50 ${String(s.p50Ms).padStart(7)} ms  p99 ${String(s.p99Ms).padStart(7)} ms${cpu(s)}`;
  // Where the event loop's time went: a thread that waits for a core while it has work bounds the rate
  // however little CPU a request takes (docs/benchmarks.md, "Session 34").
  const loop = r.rest.mainThread
    ? [
        `  the platform's main thread ran ${Math.round(r.rest.mainThread.ran * 100)}% of the REST windows and waited for a core ${Math.round(r.rest.mainThread.waited * 100)}%`,
      ]
    : [];
  return [`${r.path}, ${r.label}`, row(`REST ${r.path}`, r.rest), ...loop, row('raw DB insert', r.baseline), `ratio (REST / raw): ${r.ratio}`].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = (k: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
  const requests = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a))) || 2000;
  const only = arg('only');
  if (arg('warm-up')) WARM_UP = Number(arg('warm-up'));
  const which = arg('path') ?? 'both';
  const paths = (which === 'both' ? ['perceive', 'remember'] : [which]) as Array<'perceive' | 'remember'>;
  const profile = arg('profile');
  const profileDir = (m: string) =>
    profile ? (fs.mkdirSync(path.join(path.resolve(profile), m), { recursive: true }), path.join(path.resolve(profile), m)) : undefined;
  console.log(`perceive/remember bench on the running platform over HTTP (Node ${process.version}, load ${os.loadavg()[0].toFixed(1)})`);
  if (only !== 'pg') {
    for (const r of await runEmbedded({ requests, paths, profileDir: profileDir('embedded') })) console.log(`\n${formatPerceiveBench(r)}`);
  }
  if (only !== 'embedded') {
    try {
      for (const r of await runPostgres({ requests, paths, profileDir: profileDir('pg') })) console.log(`\n${formatPerceiveBench(r)}`);
    } catch (e) {
      console.log(`\nPostgreSQL run failed: ${(e as Error).message}`);
    }
  }
  process.exit(0);
}
