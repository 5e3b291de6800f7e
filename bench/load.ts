// Load and fault benchmark, loopback only, bounded in time.
//   npx tsx bench/load.ts [seconds=60] [--mode=embedded|distributed|both] [--faults] [--concurrency=8]
// Sustained mixed traffic (perceive 50 %, recall 25 %, stack reads 25 %, a sync every 10 perceives)
// from a small bounded client loop against a platform started on shifted ports; prints requests,
// errors, throughput and p50/p99 per mode. With --faults it also runs the fault scenarios of
// test/faults*.test.ts (kill -9, saga crashes, both Hippocampus nodes stopped, NATS, PostgreSQL, Redis,
// Cortex) and prints "acknowledged N, recovered N, lost 0" for each.
// The run functions are exported: the fault tests drive the same code.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startCluster, call, type Cluster } from '../test/helpers/cluster.ts';
import { STEP_NAMES } from '../subgraphs/sleeves/needlecast/steps.ts';
import { topology } from '../bin/up.ts';
import { loadConfig } from '../lib/config.ts';
import { BENCH_LOG_LEVEL } from './perceive.ts';

export interface LoadOptions {
  /** Gateways to spread clients over (round robin by client). */
  gateways: string[];
  durationMs: number;
  concurrency: number;
  /** Per request; a request that takes longer counts as a hang. */
  timeoutMs?: number;
  /** Stop early when this resolves (fault scenarios end the load themselves). */
  until?: Promise<unknown>;
}

export type ErrorClass = 'retryable' | 'hang' | 'other';

export interface LoadResult {
  requests: number;
  ok: number;
  errors: number;
  byClass: Record<ErrorClass, number>;
  byStatus: Record<string, number>;
  /** Examples of non-retryable errors. */
  samples: string[];
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** Slowest failed request (ms): failures are quick, not hangs. */
  maxErrorMs: number;
  /** Acknowledged perceives: CID -> stack. */
  acked: Map<string, string>;
  stacks: string[];
  /** Latencies (ms) of the successful requests per route ("POST /v1/sleeves/:id/perceive"), sorted. */
  byRoute: Map<string, number[]>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RETRYABLE = new Set([502, 503, 504]);

function percentile(sorted: number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Sustained mixed traffic; every client owns one stack and one sleeve (renewed before tokens run out). */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const timeoutMs = o.timeoutMs ?? 15_000;
  const r: LoadResult = {
    requests: 0,
    ok: 0,
    errors: 0,
    byClass: { retryable: 0, hang: 0, other: 0 },
    byStatus: {},
    samples: [],
    seconds: 0,
    rps: 0,
    p50: 0,
    p99: 0,
    maxErrorMs: 0,
    acked: new Map(),
    stacks: [],
    byRoute: new Map(),
  };
  const lat: number[] = [];
  let stop = false;
  void o.until?.then(() => (stop = true));
  const deadline = Date.now() + o.durationMs;
  const done = () => stop || Date.now() >= deadline;

  /** One request; null on failure (recorded), the response otherwise. */
  const req = async (method: string, url: string, body?: unknown, expect: number[] = [200, 201]) => {
    const t0 = Date.now();
    r.requests++;
    try {
      const res = await call(method, url, body, timeoutMs);
      if (expect.includes(res.status)) {
        r.ok++;
        lat.push(res.ms);
        const route = `${method} ${new URL(url).pathname.replace(/\/(stack|sleeve):[^/]+/g, '/:id')}`;
        let l = r.byRoute.get(route);
        if (!l) r.byRoute.set(route, (l = []));
        l.push(res.ms);
        return res;
      }
      r.errors++;
      r.byStatus[res.status] = (r.byStatus[res.status] ?? 0) + 1;
      const cls: ErrorClass = RETRYABLE.has(res.status) ? 'retryable' : 'other';
      r.byClass[cls]++;
      if (cls === 'other' && r.samples.length < 10)
        r.samples.push(`${method} ${new URL(url).pathname} -> ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
      r.maxErrorMs = Math.max(r.maxErrorMs, Date.now() - t0);
      return null;
    } catch (e) {
      r.errors++;
      const ms = Date.now() - t0;
      const hang = (e as Error).name === 'TimeoutError' || ms >= timeoutMs;
      const key = hang ? 'timeout' : 'network';
      r.byStatus[key] = (r.byStatus[key] ?? 0) + 1;
      r.byClass[hang ? 'hang' : 'retryable']++;
      r.maxErrorMs = Math.max(r.maxErrorMs, ms);
      return null;
    }
  };

  const client = async (i: number) => {
    const g = o.gateways[i % o.gateways.length]!;
    // Setup is retried: a fault may be under way.
    let stackId = '';
    let sleeveId = '';
    while (!stackId && !done()) {
      const s = await req('POST', `${g}/v1/stacks`, { name: `load-${i}` });
      if (s) stackId = s.body.id;
      else await sleep(300);
    }
    if (stackId) r.stacks.push(stackId);
    let compute = 0;
    let memory = 0;
    let sync = 0;
    let perceives = 0;
    const renew = async () => {
      while (!done()) {
        const s = await req('POST', `${g}/v1/sleeves`, { stackId, embodimentType: 'ai' });
        if (s) {
          const old = sleeveId;
          sleeveId = s.body.id;
          compute = memory = sync = 250;
          if (old) await req('DELETE', `${g}/v1/sleeves/${old}`);
          return;
        }
        await sleep(300);
      }
    };
    if (stackId) await renew();
    for (let n = 0; !done() && sleeveId; n++) {
      if (compute < 5 || memory < 5 || sync < 3) await renew();
      const op = n % 4;
      let res: Awaited<ReturnType<typeof req>>;
      if (op < 2) {
        res = await req('POST', `${g}/v1/sleeves/${sleeveId}/perceive`, { input: `load ${i} ${n} ${Date.now()}` });
        if (res) {
          r.acked.set(res.body.cid, stackId);
          compute -= 0.5;
          if (++perceives % 10 === 0) {
            if (await req('POST', `${g}/v1/sleeves/${sleeveId}/sync`)) sync -= 1;
          }
        }
      } else if (op === 2) {
        res = await req('GET', `${g}/v1/stacks/${stackId}/recall?depth=2`);
        if (res) memory -= 2;
      } else {
        res = await req('GET', `${g}/v1/stacks/${stackId}`);
      }
      if (!res) await sleep(200); // back off a little during a fault
    }
  };
  const t0 = Date.now();
  await Promise.all(Array.from({ length: o.concurrency }, (_, i) => client(i)));
  r.seconds = (Date.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  for (const l of r.byRoute.values()) l.sort((a, b) => a - b);
  r.rps = r.ok / r.seconds;
  r.p50 = percentile(lat, 0.5);
  r.p99 = percentile(lat, 0.99);
  return r;
}

export interface Verified {
  acknowledged: number;
  recovered: number;
  lost: number;
  lostCids: string[];
}

/** Every acknowledged CID must be readable (at its own epoch: no gating) on every given Hippocampus node. */
export async function verifyAcked(acked: Map<string, string>, hippocampi: string[]): Promise<Verified> {
  const cids = [...acked.keys()];
  const lostCids: string[] = [];
  let i = 0;
  const worker = async () => {
    while (i < cids.length) {
      const cid = cids[i++]!;
      const epoch = Number(cid.split('@')[1]);
      let okAll = true;
      for (const h of hippocampi) {
        let res: Awaited<ReturnType<typeof call>> | undefined;
        for (let attempt = 0; attempt < 3 && res?.status !== 200; attempt++) {
          res = await call('GET', `${h}/dag/${encodeURIComponent(cid)}?epoch=${epoch}`, undefined, 10_000).catch(() => undefined);
          if (res?.status !== 200) await sleep(300);
        }
        if (res?.status !== 200 || res.body.cid !== cid || res.body.stackId !== acked.get(cid)) okAll = false;
      }
      if (!okAll) lostCids.push(cid);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  return { acknowledged: cids.length, recovered: cids.length - lostCids.length, lost: lostCids.length, lostCids };
}

// ---- fault scenarios ----

export interface FaultReport extends Verified {
  name: string;
  load: LoadResult;
  /** ms from the fault until the platform answered again. */
  recoveredInMs: number;
  notes: string[];
}

/** kill -9 of supervised processes during load; the supervisor restarts them. */
/**
 * The cluster health check (Cluster.urls key) of a topology process, or undefined for those that
 * serve no HTTP (worker runners, the sleeve runtime).
 */
export function healthCheckOf(victim: string): string | undefined {
  if (victim.startsWith('subgraph-')) return victim;
  const m = /^(gateway|faucet|medulla|hippocampus)-([12])$/.exec(victim);
  if (m) return m[2] === '1' ? m[1] : `${m[1]}2`;
  return ['thalamus', 'dhf', 'treasury', 'needlecast', 'cortex'].includes(victim) ? victim : undefined;
}

export async function runKillFault(c: Cluster, opts: { victims: string[]; loadMs: number; concurrency?: number; gapMs?: number }): Promise<FaultReport> {
  const notes: string[] = [];
  let recoveredInMs = 0;
  const faults = (async () => {
    await sleep(opts.gapMs ?? 8000);
    for (const victim of opts.victims) {
      const pid = c.pidOf(victim);
      if (!pid) throw new Error(`no pid for ${victim}`);
      const t0 = Date.now();
      process.kill(pid, 'SIGKILL');
      notes.push(`killed ${victim} (pid ${pid})`);
      await sleep(500);
      // Back when the supervisor has a new pid for it and, if it serves HTTP, its health answers.
      for (let i = 0; i < 240 && (c.pidOf(victim) ?? pid) === pid; i++) await sleep(500);
      if ((c.pidOf(victim) ?? pid) === pid) throw new Error(`${victim} was not restarted`);
      const health = healthCheckOf(victim);
      if (health && c.urls[health]) await c.waitHealthy(120_000, [health]);
      const took = Date.now() - t0;
      recoveredInMs = Math.max(recoveredInMs, took);
      notes.push(`${victim} back in ${took} ms as pid ${c.pidOf(victim)}`);
      await sleep(opts.gapMs ?? 8000);
    }
  })();
  const load = await runLoad({ gateways: [c.gateway, c.gateway2], durationMs: opts.loadMs, concurrency: opts.concurrency ?? 6, until: faults.catch(() => {}) });
  await faults;
  const hippocampi = [c.urls.hippocampus!, ...(c.urls.hippocampus2 ? [c.urls.hippocampus2] : [])];
  const v = await verifyAcked(load.acked, hippocampi);
  return { name: `kill -9 ${opts.victims.join(', ')}`, load, recoveredInMs, notes, ...v };
}

/** A free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** A private nats-server with JetStream (its store survives a stop and start). */
export async function privateNats(): Promise<{ url: string; start(): Promise<void>; stop(): Promise<void>; cleanup(): Promise<void> }> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-nats-'));
  let proc: ChildProcess | undefined;
  const bin = fs.existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server';
  const up = () =>
    new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.once('error', () => resolve(false));
    });
  const api = {
    url: `nats://127.0.0.1:${port}`,
    async start() {
      proc = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
      for (let i = 0; i < 100 && !(await up()); i++) await sleep(100);
      await sleep(300);
    },
    async stop() {
      const p = proc;
      if (!p || p.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGKILL');
      });
    },
    async cleanup() {
      await api.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await api.start();
  return api;
}

/**
 * NATS down for `outageMs` under load (the platform runs on a private nats-server): writes are
 * buffered in the event outbox or refused cleanly, and every acknowledged perceive's event is on the
 * stream after the gap.
 */
export async function runNatsFault(
  c: Cluster,
  nats: Awaited<ReturnType<typeof privateNats>>,
  opts: { loadMs: number; outageMs: number; concurrency?: number },
): Promise<FaultReport & { eventsMissing: number; outboxLeft: number }> {
  const notes: string[] = [];
  let recoveredInMs = 0;
  const fault = (async () => {
    await sleep(Math.min(8000, opts.loadMs / 4));
    await nats.stop();
    notes.push('nats-server stopped');
    await sleep(opts.outageMs);
    const t0 = Date.now();
    await nats.start();
    notes.push(`nats-server started after ${opts.outageMs} ms`);
    // Health: a perceive's event flows again.
    recoveredInMs = Date.now() - t0;
  })();
  const load = await runLoad({ gateways: [c.gateway], durationMs: opts.loadMs, concurrency: opts.concurrency ?? 4 });
  await fault;
  const v = await verifyAcked(load.acked, [c.urls.hippocampus!]);
  // Every acknowledged perceive was announced on the stream (outbox relayed after the gap).
  const { NatsBus } = await import('../lib/bus/nats.ts');
  const bus = await NatsBus.connect({ servers: nats.url, stream: c.env.COG_NATS_STREAM, subjectPrefix: c.env.COG_NATS_PREFIX });
  const seen = new Set<string>();
  const want = new Set(load.acked.keys());
  const t0 = Date.now();
  const sub = await bus.subscribe({ subjects: ['cog.perceive.>'], startSeq: 1 }, (d) => {
    seen.add(String((d.data as { cid?: string }).cid));
  });
  while (Date.now() - t0 < 30_000 && [...want].some((cid) => !seen.has(cid))) await sleep(250);
  await sub.close();
  await bus.close();
  const eventsMissing = [...want].filter((cid) => !seen.has(cid)).length;
  const pg = (await import('pg')).default;
  const db = new pg.Client({ connectionString: c.env.DATABASE_URL });
  await db.connect();
  let outboxLeft = -1;
  for (let i = 0; i < 40; i++) {
    outboxLeft = Number((await db.query('SELECT count(*)::int AS n FROM "EventOutbox"')).rows[0].n);
    if (outboxLeft === 0) break;
    await sleep(250);
  }
  await db.end();
  notes.push(`events missing ${eventsMissing}, outbox rows left ${outboxLeft}`);
  return { name: `NATS stopped ${opts.outageMs / 1000} s`, load, recoveredInMs, notes, eventsMissing, outboxLeft, ...v };
}

/** What a client saw from one probe request during an outage (status, problem type, Retry-After). */
export interface Probe {
  route: string;
  status: number;
  contentType: string;
  retryAfter: string | null;
  ms: number;
  code?: string;
}

/** One request whose headers matter (the fault probes check problem+json and Retry-After). */
export async function probe(method: string, url: string, body?: unknown, timeoutMs = 15_000): Promise<Probe> {
  const t0 = Date.now();
  const route = `${method} ${new URL(url).pathname}`;
  try {
    const res = await fetch(url, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let code: string | undefined;
    try {
      code = (JSON.parse(text) as { code?: string }).code;
    } catch {
      /* not JSON */
    }
    return {
      route,
      status: res.status,
      contentType: res.headers.get('content-type') ?? '',
      retryAfter: res.headers.get('retry-after'),
      ms: Date.now() - t0,
      code,
    };
  } catch (e) {
    return { route, status: (e as Error).name === 'TimeoutError' ? -1 : 0, contentType: '', retryAfter: null, ms: Date.now() - t0 };
  }
}

const PG_BIN = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/14/bin'].find((d) => fs.existsSync(path.join(d, 'initdb')));

/**
 * A private PostgreSQL cluster on a free loopback port (initdb into a temp dir; as root it runs as the
 * `postgres` user): the machine's shared server is never stopped. stop() is `pg_ctl stop -m fast`.
 */
export async function privatePostgres(): Promise<{ url: string; port: number; start(): Promise<void>; stop(): Promise<void>; cleanup(): Promise<void> }> {
  if (!PG_BIN) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql');
  const { execFileSync } = await import('node:child_process');
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-pg-'));
  const data = path.join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) execFileSync('chown', ['postgres', dir]);
  const run = (bin: string, args: string[]) => {
    const cmd = path.join(PG_BIN, bin);
    if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'ignore', cwd: dir });
    else execFileSync(cmd, args, { stdio: 'ignore', cwd: dir });
  };
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-N']);
  const api = {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      run('pg_ctl', [
        '-D',
        data,
        '-o',
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
        '-l',
        path.join(dir, 'log'),
        '-w',
        'start',
      ]);
    },
    async stop() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } catch {
        /* not running */
      }
    },
    async cleanup() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        /* not running */
      }
      // Should pg_ctl have failed, end the postmaster this run started (its pid file), then its dir.
      try {
        const pid = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
        if (pid > 1) process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await api.start();
  return api;
}

/** A private redis-server on a free loopback port, without persistence. */
export async function privateRedis(): Promise<{ url: string; start(): Promise<void>; stop(): Promise<void>; cleanup(): Promise<void> }> {
  const port = await freePort();
  let proc: ChildProcess | undefined;
  const up = () =>
    new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.once('error', () => resolve(false));
    });
  const api = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      for (let i = 0; i < 100 && !(await up()); i++) await sleep(100);
    },
    async stop() {
      const p = proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGKILL');
      });
    },
    async cleanup() {
      await api.stop();
    },
  };
  await api.start();
  return api;
}

/** A server stopped for `outageMs` in the middle of a load run, with probes sent during the gap. */
async function outageUnderLoad(
  c: Cluster,
  srv: { stop(): Promise<void>; start(): Promise<void> },
  opts: { loadMs: number; outageMs: number; concurrency?: number; probes: () => Promise<Probe[]>; after?: (startedAt: number) => Promise<void> },
) {
  const notes: string[] = [];
  const probes: Probe[] = [];
  let recoveredInMs = 0;
  const fault = (async () => {
    await sleep(Math.min(8000, opts.loadMs / 4));
    await srv.stop();
    const t0 = Date.now();
    notes.push('stopped');
    // Probes run during the gap; the server comes back on time whatever they take.
    const probing = (async () => {
      await sleep(1500);
      while (Date.now() - t0 < opts.outageMs - 2500) {
        probes.push(...(await opts.probes()));
        await sleep(1000);
      }
    })();
    await sleep(opts.outageMs);
    await probing;
    await srv.start();
    const t1 = Date.now();
    notes.push(`started again after ${t1 - t0} ms`);
    const seen: string[] = [];
    recoveredInMs = await writesFlowAgain(c, t1, 30_000, seen);
    notes.push(`writes flow again ${recoveredInMs} ms after the restart (meanwhile ${seen.join(', ') || 'nothing refused'})`);
    await opts.after?.(t1);
    return t1;
  })();
  const load = await runLoad({ gateways: [c.gateway], durationMs: opts.loadMs, concurrency: opts.concurrency ?? 4, timeoutMs: 15_000 });
  const startedAt = await fault;
  return { load, probes, notes, recoveredInMs, startedAt };
}

/** Polls a write until it succeeds again; returns ms since `since`. */
async function writesFlowAgain(c: Cluster, since: number, timeoutMs = 30_000, seen: string[] = []): Promise<number> {
  for (;;) {
    const r = await probe('POST', `${c.gateway}/v1/stacks`, { name: 'after-outage' });
    if (r.status === 201) return Date.now() - since;
    const k = `${r.status} ${r.code ?? ''}`;
    if (!seen.includes(k)) seen.push(k);
    if (Date.now() - since > timeoutMs) throw new Error(`writes still refused ${timeoutMs} ms after the outage: ${JSON.stringify(r)}`);
    await sleep(250);
  }
}

export type OutageReport = FaultReport & { probes: Probe[]; halfApplied: number };

/**
 * PostgreSQL (a private cluster the platform's DATABASE_URL points at) stopped for `outageMs` under
 * load: writes in the gap are a quick 503 problem+json with Retry-After, nothing is half-applied
 * (every stored memory node's stack exists and every acknowledged CID is intact), and writes flow
 * again without restarting the platform.
 */
export async function runPostgresFault(
  c: Cluster,
  pgs: Awaited<ReturnType<typeof privatePostgres>>,
  opts: { loadMs: number; outageMs: number; concurrency?: number },
): Promise<OutageReport> {
  let sleeve = '';
  const s = await call('POST', `${c.gateway}/v1/stacks`, { name: 'pg-probe' });
  const sl = await call('POST', `${c.gateway}/v1/sleeves`, { stackId: s.body.id, embodimentType: 'ai' });
  sleeve = sl.body.id;
  const o = await outageUnderLoad(c, pgs, {
    ...opts,
    probes: async () => [
      await probe('POST', `${c.gateway}/v1/stacks`, { name: 'during-outage' }),
      await probe('POST', `${c.gateway}/v1/sleeves/${sleeve}/perceive`, { input: 'during outage' }),
    ],
  });
  const recoveredInMs = o.recoveredInMs;
  const v = await verifyAcked(o.load.acked, [c.urls.hippocampus!]);
  // Half-applied perceives: a memory node without its stack, or a perceive counted nowhere.
  const pg = (await import('pg')).default;
  const db = new pg.Client({ connectionString: c.env.DATABASE_URL });
  await db.connect();
  const orphan = Number(
    (await db.query('SELECT count(*)::int AS n FROM "MemoryNode" m WHERE NOT EXISTS (SELECT 1 FROM "Stack" s WHERE s.id = m."stackId")')).rows[0].n,
  );
  await db.end();
  return { name: `PostgreSQL stopped ${opts.outageMs / 1000} s`, load: o.load, recoveredInMs, notes: o.notes, probes: o.probes, halfApplied: orphan, ...v };
}

/**
 * Redis (a private server the platform's REDIS_URL points at) stopped for `outageMs` under load: the
 * gateway keeps answering (its rate limit lets requests through while the cache is down), the faucet
 * refuses cleanly (503: its cooldown cannot be checked) and both work again when Redis returns.
 */
export async function runRedisFault(
  c: Cluster,
  redis: Awaited<ReturnType<typeof privateRedis>>,
  opts: { loadMs: number; outageMs: number; concurrency?: number },
): Promise<OutageReport & { faucetAfter: number }> {
  const stacks: string[] = [];
  for (let i = 0; i < 12; i++) stacks.push((await call('POST', `${c.gateway}/v1/stacks`, { name: `redis-probe-${i}` })).body.id);
  let k = 0;
  // The faucet drips again once Redis is back (a stack that never dripped), checked right after
  // the restart, while the load still runs.
  let faucetAfter = -1;
  const faucetSeen: string[] = [];
  const faucetAgain = async (startedAt: number) => {
    for (let i = 0; i < 60; i++) {
      const r = await probe('POST', `${c.urls.faucet}/v1/faucet/drip`, { stackId: stacks[11] });
      if (r.status === 200 || r.status === 201) {
        faucetAfter = Date.now() - startedAt;
        return;
      }
      if (faucetSeen.length < 5) faucetSeen.push(`${r.status} ${r.code ?? ''} ${r.ms}ms`);
      await sleep(500);
    }
  };
  const o = await outageUnderLoad(c, redis, {
    ...opts,
    probes: async () => [
      await probe('GET', `${c.gateway}/v1/stacks/${stacks[0]}`),
      await probe('POST', `${c.urls.faucet}/v1/faucet/drip`, { stackId: stacks[1 + (k++ % 10)] }),
    ],
    after: faucetAgain,
  });
  const recoveredInMs = o.recoveredInMs;
  o.notes.push(`faucet drips again ${faucetAfter} ms after the restart (before that: ${faucetSeen.join(', ') || 'nothing'})`);
  const v = await verifyAcked(o.load.acked, [c.urls.hippocampus!]);
  return { name: `Redis stopped ${opts.outageMs / 1000} s`, load: o.load, recoveredInMs, notes: o.notes, probes: o.probes, halfApplied: 0, faucetAfter, ...v };
}

/** The pid of the anvil node listening on `port` (a child of a platform this run started), if any. */
export function anvilPid(port: number): number | undefined {
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let argv: string[];
    try {
      argv = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!/(^|\/)anvil$/.test(argv[0] ?? '')) continue;
    const i = argv.indexOf('--port');
    if (i >= 0 && Number(argv[i + 1]) === port) return Number(d);
  }
  return undefined;
}

export type CortexFaultReport = FaultReport & {
  anvilBefore: number;
  anvilAfter?: number;
  blocksDuring: number;
  blocksSince: number;
  medullaDown: number;
  foldsDuring: number;
  outboxLeft: number;
  outboxRows: number;
  chainBack: number;
};

/**
 * Cortex (the embedded anvil) stopped under load: SIGSTOP, so it neither answers nor refuses. Medulla
 * keeps mining, Thalamus keeps folding and submitting (its evm leaves are the outbox rows confirmed so
 * far, read from the database, so a Cortex outage is no gap: the unconfirmed ones wait), the Cortex
 * service's supervision ends the hung node and starts it again from its state file, and the chain
 * outbox (everything the platform acknowledged and owes the chain) drains afterwards.
 */
export async function runCortexFault(c: Cluster, opts: { loadMs: number; concurrency?: number }): Promise<CortexFaultReport> {
  const notes: string[] = [];
  const port = Number(c.env.CORTEX_PORT);
  const before = anvilPid(port);
  if (!before) throw new Error(`no anvil on port ${port}`);
  const height = async () => Number((await call('GET', `${c.urls.medulla}/health`).catch(() => ({ body: {} as Record<string, unknown> }))).body?.height ?? NaN);
  let stoppedAt = 0;
  let backAt = 0;
  let blocksDuring = 0;
  let foldsDuring = 0;
  let medullaDown = 0;
  let h0 = NaN;
  const pg = (await import('pg')).default;
  const db = new pg.Client({ connectionString: c.env.DATABASE_URL });
  await db.connect();
  const lastFold = async () => Number((await db.query('SELECT coalesce(max(epoch), -1)::int AS e FROM "EpochAnchor" WHERE submitted')).rows[0].e);
  const fault = (async () => {
    await sleep(Math.min(8000, opts.loadMs / 4));
    h0 = await height();
    const f0 = await lastFold();
    process.kill(before, 'SIGSTOP');
    stoppedAt = Date.now();
    notes.push(`anvil pid ${before} stopped (SIGSTOP)`);
    // Back when a node answers on the port again (the supervisor's restart).
    for (;;) {
      const r = await call('POST', c.urls.cortex!, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, 1500).catch(() => undefined);
      if (r?.status === 200 && anvilPid(port) !== before) break;
      if (!Number.isFinite(await height())) medullaDown++;
      if (Date.now() - stoppedAt > 60_000) throw new Error('anvil was not restarted within 60 s');
      await sleep(500);
    }
    backAt = Date.now();
    blocksDuring = (await height()) - h0;
    foldsDuring = (await lastFold()) - f0;
    notes.push(
      `anvil back as pid ${anvilPid(port)} after ${backAt - stoppedAt} ms; meanwhile Medulla mined ${blocksDuring} blocks and Thalamus folded and submitted ${foldsDuring} epochs`,
    );
  })();
  const load = await runLoad({ gateways: [c.gateway], durationMs: opts.loadMs, concurrency: opts.concurrency ?? 3 });
  await fault;
  // What the chain is owed from the outage: the rows written until the load and the restart were
  // over. Each epoch after that queues an anchor and an emission of its own, so the outbox as a
  // whole is empty only in the moments between a block's receipts and the next epoch's rows (CI
  // once waited 90 s for one and always found the newest epoch's row in flight).
  const owedUntil = new Date().toISOString();
  const v = await verifyAcked(load.acked, [c.urls.hippocampus!]);
  let outboxLeft = -1;
  const t0 = Date.now();
  while (Date.now() - t0 < 90_000) {
    // The ledger rows not settled yet too (a settled one rides on its settle row, counted here).
    outboxLeft = Number(
      (
        await db.query(
          `SELECT ((SELECT count(*) FROM "ChainOutbox" WHERE status IN ('pending', 'submitted') AND "createdAt" <= $1::timestamptz)
            + (SELECT count(*) FROM "ChainLedgerIntent" WHERE status = 'pending' AND "createdAt" <= $1::timestamptz))::int AS n`,
          [owedUntil],
        )
      ).rows[0].n,
    );
    if (outboxLeft === 0) break;
    await sleep(500);
  }
  const outboxRows = Number((await db.query(`SELECT count(*)::int AS n FROM "ChainOutbox" WHERE status = 'confirmed'`)).rows[0].n);
  await db.end();
  const blocksSince = (await height()) - h0;
  notes.push(`Medulla unanswered ${medullaDown} times during the outage, +${blocksSince} blocks from the stop until the outbox drained`);
  notes.push(`outbox drained of the rows written until then ${Date.now() - backAt} ms after the restart (${outboxRows} confirmed, ${outboxLeft} left)`);
  return {
    name: 'Cortex (anvil) stopped',
    load,
    recoveredInMs: backAt - stoppedAt,
    notes,
    ...v,
    anvilBefore: before,
    anvilAfter: anvilPid(port),
    blocksDuring,
    blocksSince,
    medullaDown,
    foldsDuring,
    outboxLeft,
    outboxRows,
    chainBack: backAt - stoppedAt,
  };
}

export type HippocampusFaultReport = FaultReport & {
  /** How long both nodes were stopped (ms): the requested time, longer if no epoch ended meanwhile. */
  stoppedMs: number;
  medullaBlocksDuring: number;
  epochsDuring: number;
  cortexBlocksDuring: number;
  /** Medulla or Cortex did not answer a sample during the stop. */
  chainsDown: number;
  /** Folds stored during the stop, and the epochs among them folded with an `ipfs` gap. */
  foldsDuring: number;
  ipfsGapEpochs: number[];
  /** Of those, the epochs whose shard-loss residue (dedupe key shard-loss:thalamus:<epoch>) is open. */
  residueEpochs: number[];
  /** Recall probes through both gateways during the stop (the walk reads through the Hippocampus). */
  probes: Probe[];
  /** Perceive probes through both gateways during the stop (a write calls no Hippocampus). */
  writeProbes: Probe[];
  /** ms from SIGCONT until a perceive and a recall succeed through both gateways. */
  flowsAgainInMs: number;
};

/**
 * Both Hippocampus nodes stopped (SIGSTOP: they neither answer nor refuse) under perceive/recall
 * load, then continued. The other chains keep running: Medulla mines, epochs advance, Cortex makes
 * blocks, the Thalamus folds every ended epoch with an `ipfs` gap (its DAG leaves come through the
 * Hippocampus) and each such gap opens a shard-loss residue. Recalls get quick 503 problems (every
 * node costs one bounded attempt); writes go on (a write's payload commits with its index row, no
 * Hippocampus on its way); nothing acknowledged is lost, and recalls flow again after SIGCONT.
 */
export async function runHippocampusFault(c: Cluster, opts: { loadMs: number; stopMs?: number; concurrency?: number }): Promise<HippocampusFaultReport> {
  const notes: string[] = [];
  const stopMs = opts.stopMs ?? 10_000;
  const nodes = ['hippocampus-1', 'hippocampus-2'].map((name) => ({ name, pid: c.pidOf(name) }));
  for (const n of nodes) if (!n.pid) throw new Error(`no pid for ${n.name}`);
  const medulla = async () => {
    const r = await call('GET', `${c.urls.medulla}/health`, undefined, 3000).catch(() => undefined);
    return { height: Number(r?.body?.height ?? NaN), epoch: Number(r?.body?.epoch ?? NaN) };
  };
  const cortexBlock = async () => {
    const r = await call('POST', c.urls.cortex!, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }, 3000).catch(() => undefined);
    return typeof r?.body?.result === 'string' ? Number(BigInt(r.body.result)) : NaN;
  };
  const pg = (await import('pg')).default;
  const db = new pg.Client({ connectionString: c.env.DATABASE_URL });
  await db.connect();
  const lastFold = async () => Number((await db.query('SELECT coalesce(max(epoch), -1)::int AS e FROM "EpochAnchor"')).rows[0].e);
  const gapEpochs = async (after: number, upTo = 1e9) =>
    (await db.query(`SELECT epoch FROM "EpochAnchor" WHERE 'ipfs' = ANY(gaps) AND epoch > $1 AND epoch <= $2 ORDER BY epoch`, [after, upTo])).rows.map((r) =>
      Number(r.epoch),
    );
  // A probe stack with a sleeve on each gateway, made before the stop.
  const gateways = [c.gateway, c.gateway2];
  const probeSleeves: Array<{ g: string; stackId: string; sleeveId: string }> = [];
  for (const g of gateways) {
    const stackId = (await call('POST', `${g}/v1/stacks`, { name: 'hippocampus-probe' })).body.id as string;
    const sleeveId = (await call('POST', `${g}/v1/sleeves`, { stackId, embodimentType: 'ai' })).body.id as string;
    await call('POST', `${g}/v1/sleeves/${sleeveId}/perceive`, { input: 'before the stop' });
    probeSleeves.push({ g, stackId, sleeveId });
  }
  const probes: Probe[] = [];
  const writeProbes: Probe[] = [];
  let stoppedMs = 0;
  let flowsAgainInMs = -1;
  let chainsDown = 0;
  let foldsDuring = 0;
  let ipfsGapEpochs: number[] = [];
  let before = { m: { height: NaN, epoch: NaN }, b: NaN, f: -1 };
  let after = { m: { height: NaN, epoch: NaN }, b: NaN, f: -1 };
  const fault = (async () => {
    await sleep(Math.min(8000, opts.loadMs / 4));
    before = { m: await medulla(), b: await cortexBlock(), f: await lastFold() };
    const t0 = Date.now();
    for (const n of nodes) process.kill(n.pid!, 'SIGSTOP');
    notes.push(`SIGSTOP ${nodes.map((n) => `${n.name} (pid ${n.pid})`).join(', ')}`);
    // Probes run beside the clock (each may take up to its timeout); only those answered before
    // SIGCONT count.
    const pending: Array<Promise<void>> = [];
    let contAt = Infinity;
    const launch = (into: Probe[], method: string, url: string, body?: unknown) =>
      pending.push(probe(method, url, body).then((x) => void (Date.now() < contAt && into.push(x))));
    try {
      // The requested time, and on until an epoch ended during the stop (a slow machine mines slowly).
      for (let k = 0; Date.now() - t0 < stopMs || (!(await gapEpochs(before.f)).length && Date.now() - t0 < stopMs * 3); k++) {
        const x = probeSleeves[k % probeSleeves.length]!;
        if (Date.now() - t0 < stopMs - 3000) {
          launch(writeProbes, 'POST', `${x.g}/v1/sleeves/${x.sleeveId}/perceive`, { input: `during the stop ${k}` });
          launch(probes, 'GET', `${x.g}/v1/stacks/${x.stackId}/recall?depth=2`);
        }
        if (!Number.isFinite((await medulla()).height) || !Number.isFinite(await cortexBlock())) chainsDown++;
        await sleep(1000);
      }
      after = { m: await medulla(), b: await cortexBlock(), f: await lastFold() };
    } finally {
      contAt = Date.now();
      for (const n of nodes) process.kill(n.pid!, 'SIGCONT');
      stoppedMs = Date.now() - t0;
    }
    await Promise.all(pending);
    notes.push(`SIGCONT after ${stoppedMs} ms`);
    foldsDuring = after.f - before.f;
    ipfsGapEpochs = await gapEpochs(before.f, after.f);
    // Flowing again: a perceive and a recall succeed through both gateways.
    const t1 = Date.now();
    for (const x of probeSleeves) {
      for (;;) {
        const w = await probe('POST', `${x.g}/v1/sleeves/${x.sleeveId}/perceive`, { input: 'after the stop' });
        const r = w.status === 200 ? await probe('GET', `${x.g}/v1/stacks/${x.stackId}/recall?depth=2`) : w;
        if (r.status === 200) break;
        if (Date.now() - t1 > 60_000) throw new Error(`perceive/recall did not flow again within 60 s (last ${r.route} -> ${r.status})`);
        await sleep(250);
      }
    }
    flowsAgainInMs = Date.now() - t1;
  })();
  // The load runs on past the fault: writes must flow again, and what they acknowledge must stay.
  const load = await runLoad({ gateways, durationMs: opts.loadMs, concurrency: opts.concurrency ?? 4 });
  await fault;
  const v = await verifyAcked(load.acked, [c.urls.hippocampus!, c.urls.hippocampus2!]);
  const keys = ipfsGapEpochs.map((e) => `shard-loss:thalamus:${e}`);
  const residueEpochs = (
    await db.query(`SELECT epoch FROM "Residue" WHERE kind = 'shard-loss' AND status = 'open' AND "dedupeKey" = ANY($1) ORDER BY epoch`, [keys])
  ).rows.map((r) => Number(r.epoch));
  await db.end();
  const medullaBlocksDuring = after.m.height - before.m.height;
  const epochsDuring = after.m.epoch - before.m.epoch;
  const cortexBlocksDuring = after.b - before.b;
  const refused = probes.filter((x) => x.status === 503 && /problem\+json/.test(x.contentType) && x.retryAfter).length;
  notes.push(
    `during the stop: Medulla +${medullaBlocksDuring} blocks, epoch +${epochsDuring}, Cortex +${cortexBlocksDuring} blocks, chains unanswered ${chainsDown}; ${foldsDuring} folds, ipfs gaps at epochs [${ipfsGapEpochs.join(', ')}], shard-loss residues open for [${residueEpochs.join(', ')}]`,
  );
  notes.push(
    `recall probes: ${probes.filter((x) => x.status === 200).length}/${probes.length} answered 200, ${refused} were 503 problem+json with Retry-After, slowest ${Math.max(0, ...probes.map((x) => x.ms))} ms; perceive probes: ${writeProbes.filter((x) => x.status === 200).length}/${writeProbes.length} answered 200; perceive and recall flow again ${flowsAgainInMs} ms after SIGCONT`,
  );
  return {
    name: `Hippocampus (both nodes) stopped ${(stoppedMs / 1000).toFixed(0)} s`,
    load,
    recoveredInMs: flowsAgainInMs,
    notes,
    ...v,
    stoppedMs,
    medullaBlocksDuring,
    epochsDuring,
    cortexBlocksDuring,
    chainsDown,
    foldsDuring,
    ipfsGapEpochs,
    residueEpochs,
    probes,
    writeProbes,
    flowsAgainInMs,
  };
}

export interface SagaCrashReport {
  name: string;
  sagas: Array<{ sagaId: string; crashedAfter: string; status: string; sourceAlive: boolean; targetAlive: boolean }>;
  acknowledged: number;
  recovered: number;
  lost: number;
}

/**
 * Needlecast router killed mid-saga (startCluster's needlecastFaults.crashAfter, injected by the
 * preload test/helpers/fault-hooks.mjs: the router SIGKILLs itself right after persisting each
 * listed step, once): the supervisor restarts
 * it and recoverSagas finishes or compensates every saga.
 */
export async function runSagaCrash(c: Cluster, steps: string[]): Promise<SagaCrashReport> {
  const sagas: SagaCrashReport['sagas'] = [];
  for (const step of steps) {
    const s = await call('POST', `${c.gateway}/v1/stacks`, { name: `saga-${step}` });
    const stackId = s.body.id as string;
    const from = (await call('POST', `${c.gateway}/v1/sleeves`, { stackId, embodimentType: 'ai' })).body.id as string;
    for (let i = 0; i < 3; i++) await call('POST', `${c.gateway}/v1/sleeves/${from}/perceive`, { input: `before ${step} ${i}` });
    const to = (await call('POST', `${c.gateway}/v1/sleeves`, { stackId, embodimentType: 'human' })).body.id as string;
    const sagaId = `needle:${Buffer.from(`${step}${Date.now()}`).toString('hex').slice(0, 32).padEnd(32, '0')}`;
    const before = c.pidOf('needlecast');
    // The router dies during this request: the client sees a connection error, not a hang.
    const first = await call('POST', `${c.urls.needlecast}/needlecast`, { from, to, sagaId }, 30_000).catch((e: Error) => ({
      status: 0,
      body: e.message,
      ms: 0,
    }));
    // Restarted by the supervisor; recovery runs before it listens again.
    await c.waitHealthy(120_000, ['needlecast']);
    let view: { status: string } | undefined;
    for (let i = 0; i < 60; i++) {
      const r = await call('GET', `${c.urls.needlecast}/needlecast/${sagaId}`).catch(() => undefined);
      view = r?.body;
      if (view && (view.status === 'completed' || view.status === 'compensated')) break;
      await sleep(500);
    }
    const stack = (await call('GET', `${c.gateway}/v1/stacks/${stackId}`)).body as { sleeves: Array<{ id: string; alive: boolean }> };
    const alive = (id: string) => !!stack.sleeves.find((x) => x.id === id)?.alive;
    sagas.push({
      sagaId,
      crashedAfter: step,
      status: `${view?.status ?? 'unknown'} (first answer ${first.status}, router pid ${before} -> ${c.pidOf('needlecast')})`,
      sourceAlive: alive(from),
      targetAlive: alive(to),
    });
  }
  // Finished: completed moves the stack (source gone, target alive); compensated leaves the source.
  const good = sagas.filter(
    (x) => (x.status.startsWith('completed') && !x.sourceAlive && x.targetAlive) || (x.status.startsWith('compensated') && x.sourceAlive),
  );
  return {
    name: `needlecast router killed after ${steps.join(', ')}`,
    sagas,
    acknowledged: sagas.length,
    recovered: good.length,
    lost: sagas.length - good.length,
  };
}

// ---- CLI ----

function table(rows: Array<Record<string, string | number>>): string {
  const cols = Object.keys(rows[0] ?? {});
  const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (vals: string[]) => `| ${vals.map((v, i) => v.padEnd(w[i]!)).join(' | ')} |`;
  return [line(cols), `|${w.map((n) => '-'.repeat(n + 2)).join('|')}|`, ...rows.map((r) => line(cols.map((c) => String(r[c]))))].join('\n');
}

const loadRow = (mode: string, r: LoadResult) => ({
  mode,
  seconds: r.seconds.toFixed(0),
  requests: r.requests,
  errors: r.errors,
  'ok req/s': r.rps.toFixed(1),
  'p50 ms': r.p50,
  'p99 ms': r.p99,
});

async function main(argv: string[]): Promise<void> {
  const seconds = Number(argv.find((a) => /^\d+$/.test(a)) ?? 60);
  const mode = (argv.find((a) => a.startsWith('--mode='))?.slice(7) ?? 'embedded') as 'embedded' | 'distributed' | 'both';
  const concurrency = Number(argv.find((a) => a.startsWith('--concurrency='))?.slice(14) ?? 8);
  const faults = argv.includes('--faults');
  const rows: Array<Record<string, string | number>> = [];
  const faultRows: Array<Record<string, string | number>> = [];
  const routeRows: Array<Record<string, string | number>> = [];
  const modes = mode === 'both' ? (['embedded', 'distributed'] as const) : [mode];
  for (const m of modes) {
    const c = await startCluster({
      mode: m,
      shift: m === 'embedded' ? 23000 : 24000,
      needlecastFaults: faults && m === 'distributed' ? { crashAfter: STEP_NAMES } : undefined,
      env: { LOG_LEVEL: BENCH_LOG_LEVEL },
    });
    try {
      const t0 = Date.now();
      await c.waitHealthy(180_000);
      // On stderr, so a profiler (or an impatient reader) can tell start-up from the measured load.
      console.error(`${m}: healthy after ${((Date.now() - t0) / 1000).toFixed(1)} s; ${seconds} s of load from ${concurrency} clients`);
      const gateways = m === 'distributed' ? [c.gateway, c.gateway2] : [c.gateway];
      const r = await runLoad({ gateways, durationMs: seconds * 1000, concurrency });
      rows.push(loadRow(m, r));
      routeRows.push(
        ...[...r.byRoute]
          .sort((a, b) => b[1].length - a[1].length)
          .map(([route, l]) => ({ mode: m, route, requests: l.length, 'p50 ms': percentile(l, 0.5), 'p99 ms': percentile(l, 0.99) })),
      );
      if (r.samples.length) console.error(`${m} errors:`, r.samples.join('\n'));
      if (faults && m === 'distributed') {
        // Every process of the topology, one at a time (Cortex last: its anvil restarts with it).
        const victims = topology(loadConfig(c.env))
          .map((x) => x.name)
          .sort((a, b) => Number(a === 'cortex') - Number(b === 'cortex'));
        const k = await runKillFault(c, { victims, loadMs: 60 * 60_000, gapMs: 3000 });
        faultRows.push({
          fault: k.name,
          result: `acknowledged ${k.acknowledged}, recovered ${k.recovered}, lost ${k.lost}`,
          'client errors': `${k.load.errors} (retryable ${k.load.byClass.retryable}, hangs ${k.load.byClass.hang}, other ${k.load.byClass.other})`,
          'back in': `${(k.recoveredInMs / 1000).toFixed(1)} s`,
        });
        const s = await runSagaCrash(c, [...STEP_NAMES]);
        faultRows.push({
          fault: s.name,
          result: `acknowledged ${s.acknowledged}, recovered ${s.recovered}, lost ${s.lost}`,
          'client errors': '-',
          'back in': s.sagas.map((x) => x.status.split(' ')[0]).join(', '),
        });
        const h = await runHippocampusFault(c, { loadMs: 40_000, stopMs: 10_000 });
        faultRows.push({
          fault: h.name,
          result: `acknowledged ${h.acknowledged}, recovered ${h.recovered}, lost ${h.lost}; Medulla +${h.medullaBlocksDuring} blocks, Cortex +${h.cortexBlocksDuring} blocks, ${h.foldsDuring} folds (${h.ipfsGapEpochs.length} ipfs gaps, ${h.residueEpochs.length} shard-loss residues) meanwhile`,
          'client errors': `${h.load.errors} (retryable ${h.load.byClass.retryable}, hangs ${h.load.byClass.hang}, other ${h.load.byClass.other}; slowest ${h.load.maxErrorMs} ms)`,
          'back in': `${(h.flowsAgainInMs / 1000).toFixed(1)} s`,
        });
      }
    } finally {
      await c.stop();
    }
  }
  if (faults) {
    const nats = await privateNats();
    const c = await startCluster({ mode: 'embedded', realAdapters: true, natsUrl: nats.url, shift: 25000 });
    try {
      await c.waitHealthy(180_000);
      const f = await runNatsFault(c, nats, { loadMs: 40_000, outageMs: 10_000 });
      faultRows.push({
        fault: f.name,
        result: `acknowledged ${f.acknowledged}, recovered ${f.recovered}, lost ${f.lost}; events missing ${f.eventsMissing}`,
        'client errors': `${f.load.errors} (retryable ${f.load.byClass.retryable}, hangs ${f.load.byClass.hang}, other ${f.load.byClass.other})`,
        'back in': `${(f.recoveredInMs / 1000).toFixed(1)} s`,
      });
    } finally {
      await c.stop();
      await nats.cleanup();
    }
    const errs = (l: LoadResult) => `${l.errors} (retryable ${l.byClass.retryable}, hangs ${l.byClass.hang}, other ${l.byClass.other})`;
    const pgs = await privatePostgres();
    const cp = await startCluster({ mode: 'embedded', realAdapters: true, databaseUrl: pgs.url, shift: 26000 });
    try {
      await cp.waitHealthy(180_000);
      const f = await runPostgresFault(cp, pgs, { loadMs: 40_000, outageMs: 10_000 });
      const refused = f.probes.filter((x) => x.status === 503 && x.retryAfter).length;
      faultRows.push({
        fault: f.name,
        result: `acknowledged ${f.acknowledged}, recovered ${f.recovered}, lost ${f.lost}; half-applied ${f.halfApplied}; gap writes 503 + Retry-After ${refused}/${f.probes.length}`,
        'client errors': errs(f.load),
        'back in': `${(f.recoveredInMs / 1000).toFixed(1)} s`,
      });
    } finally {
      await cp.stop();
      await pgs.cleanup();
    }
    const redis = await privateRedis();
    const cr = await startCluster({ mode: 'embedded', realAdapters: true, redisUrl: redis.url, shift: 27000 });
    try {
      await cr.waitHealthy(180_000);
      const f = await runRedisFault(cr, redis, { loadMs: 40_000, outageMs: 10_000 });
      const faucet503 = f.probes.filter((x) => x.route.includes('faucet') && x.status === 503).length;
      faultRows.push({
        fault: f.name,
        result: `acknowledged ${f.acknowledged}, recovered ${f.recovered}, lost ${f.lost}; faucet 503 ${faucet503}, drips again after ${(f.faucetAfter / 1000).toFixed(1)} s`,
        'client errors': errs(f.load),
        'back in': `${(f.recoveredInMs / 1000).toFixed(1)} s`,
      });
    } finally {
      await cr.stop();
      await redis.cleanup();
    }
    const cc = await startCluster({ mode: 'embedded', realAdapters: true, shift: 28000 });
    try {
      await cc.waitHealthy(180_000);
      const f = await runCortexFault(cc, { loadMs: 30_000, concurrency: 2 });
      faultRows.push({
        fault: f.name,
        result: `acknowledged ${f.acknowledged}, recovered ${f.recovered}, lost ${f.lost}; Medulla +${f.blocksDuring} blocks, Thalamus +${f.foldsDuring} folds meanwhile; outbox left ${f.outboxLeft}`,
        'client errors': errs(f.load),
        'back in': `${(f.recoveredInMs / 1000).toFixed(1)} s`,
      });
    } finally {
      await cc.stop();
    }
  }
  console.log(table(rows));
  if (routeRows.length) console.log('\n' + table(routeRows));
  if (faultRows.length) console.log('\n' + table(faultRows));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
