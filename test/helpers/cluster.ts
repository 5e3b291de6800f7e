// A whole platform in child processes for end-to-end, fault and load runs, on shifted ports and
// loopback only:
//   * distributed: `cog up --distributed` (every service its own supervised process) against this
//     machine's PostgreSQL (a fresh database), NATS JetStream (a unique stream and subject prefix)
//     and Redis (a unique key prefix);
//   * embedded: `cog start` (one process), optionally with real adapters (DATABASE_URL, NATS_URL...).
// The children run in their own process group; stop() ends the group and removes what the run made.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PLATFORM_NODE_FLAGS } from '../../bin/node-flags.ts';
import { shiftedPortsEnv, SUBGRAPH_PORTS } from '../../bin/up.ts';
import { STEP_NAMES, type StepName } from '../../subgraphs/sleeves/index.ts';
import { freshDatabase } from './postgres.ts';

const root = path.resolve(import.meta.dirname, '../..');
/** What vitest/vite add to the environment, kept from the children. */
const VITE_VARS = ['BASE_URL', 'MODE', 'DEV', 'PROD', 'SSR', 'VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'TEST', 'NODE_ENV'];

export const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface ClusterOptions {
  mode: 'distributed' | 'embedded';
  /** Port shift (the spec ports plus this). */
  shift: number;
  /** Embedded mode only: use PostgreSQL, NATS and Redis like distributed mode does. */
  realAdapters?: boolean;
  /** Another NATS server (fault tests run their own). */
  natsUrl?: string;
  /** Another PostgreSQL database (fault tests run their own server); used as is, never dropped. */
  databaseUrl?: string;
  /** Another Redis server (fault tests run their own). */
  redisUrl?: string;
  env?: Record<string, string>;
  /**
   * Needlecast fault hooks, injected into every child by the preload test/helpers/fault-hooks.mjs:
   * the router SIGKILLs itself after each `crashAfter` step (once each), or `failAt` throws.
   */
  needlecastFaults?: { crashAfter?: readonly StepName[]; failAt?: StepName };
  /** Flags for the platform's node besides PLATFORM_NODE_FLAGS, as npm start runs it (e.g. --cpu-prof, which NODE_OPTIONS refuses). */
  nodeArgs?: string[];
}

/** The environment that makes the children load the fault hooks (test/helpers/fault-hooks.ts). */
export function faultHooksEnv(f: NonNullable<ClusterOptions['needlecastFaults']>, inheritedNodeOptions = ''): Record<string, string> {
  for (const s of [...(f.crashAfter ?? []), ...(f.failAt ? [f.failAt] : [])]) {
    if (!(STEP_NAMES as readonly string[]).includes(s)) throw new Error(`needlecastFaults: unknown step "${s}" (one of ${STEP_NAMES.join(', ')})`);
  }
  const preload = pathToFileURL(path.join(root, 'test', 'helpers', 'fault-hooks.mjs')).href;
  return {
    NODE_OPTIONS: `${inheritedNodeOptions} --import ${preload}`.trim(),
    ...(f.crashAfter?.length ? { COG_TEST_NEEDLECAST_CRASH_AFTER: f.crashAfter.join(',') } : {}),
    ...(f.failAt ? { COG_TEST_NEEDLECAST_FAIL_AT: f.failAt } : {}),
  };
}

export interface Cluster {
  mode: ClusterOptions['mode'];
  gateway: string;
  gateway2: string;
  urls: Record<string, string>;
  dataDir: string;
  env: Record<string, string>;
  /** The pid of the process `cog.mjs` runs in (the embedded platform itself; the supervisor when distributed). */
  pid: number;
  /** Everything the children wrote (tail). */
  output(): string;
  /** The current pid of a supervised process (distributed mode), from the supervisor's log. */
  pidOf(name: string): number | undefined;
  /** How many times the supervisor restarted a process. */
  restarts(name: string): number;
  /** Resolves when every HTTP service answers its health check. */
  waitHealthy(timeoutMs: number, only?: string[]): Promise<number>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ok(url: string, init?: RequestInit): Promise<boolean> {
  try {
    const r = await fetch(url, { ...init, signal: AbortSignal.timeout(3000) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  }
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const id = randomBytes(4).toString('hex');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `cog-${o.mode}-`));
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !VITE_VARS.includes(k))) as Record<string, string>;
  const real = o.mode === 'distributed' || o.realAdapters;
  const db = real && !o.databaseUrl ? await freshDatabase() : undefined;
  const databaseUrl = o.databaseUrl ?? db?.url;
  const natsUrl = o.natsUrl ?? NATS_URL;
  const redisUrl = o.redisUrl ?? REDIS_URL;
  const env: Record<string, string> = {
    ...inherited,
    ...shiftedPortsEnv(o.shift),
    COG_DATA_DIR: dataDir,
    COG_MASTER_KEY: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
    ...(real && databaseUrl
      ? {
          DATABASE_URL: databaseUrl,
          NATS_URL: natsUrl,
          REDIS_URL: redisUrl,
          COG_NATS_STREAM: `COGT_${id}`,
          COG_NATS_PREFIX: `cogt_${id}`,
          COG_REDIS_PREFIX: `cogt:${id}:`,
        }
      : {}),
    ...(o.needlecastFaults ? faultHooksEnv(o.needlecastFaults, inherited.NODE_OPTIONS) : {}),
    ...o.env,
  };
  const port = (k: string) => Number(env[k]);
  const local = (p: number) => `http://127.0.0.1:${p}`;
  const urls: Record<string, string> = {
    gateway: local(port('GATEWAY_PORT')),
    needlecast: local(port('NEEDLECAST_PORT')),
    thalamus: local(port('THALAMUS_PORT')),
    dhf: local(port('DHF_PORT')),
    treasury: local(port('TREASURY_PORT')),
    faucet: local(port('FAUCET_PORT')),
    medulla: local(port('MEDULLA_PORT')),
    hippocampus: local(port('HIPPOCAMPUS_PORT')),
    cortex: local(port('CORTEX_PORT')),
  };
  if (o.mode === 'distributed') {
    Object.assign(urls, {
      gateway2: local(port('GATEWAY_PORT') + 100),
      faucet2: local(port('FAUCET_PORT') + 100),
      medulla2: local(port('MEDULLA_PORT') + 1),
      hippocampus2: local(port('HIPPOCAMPUS_PORT') + 1),
    });
    for (const [name, p] of Object.entries(SUBGRAPH_PORTS)) urls[`subgraph-${name}`] = local(p + o.shift);
  }
  const args = o.mode === 'distributed' ? ['up', '--distributed'] : ['start'];
  const child: ChildProcess = spawn(process.execPath, [...PLATFORM_NODE_FLAGS, ...(o.nodeArgs ?? []), path.join(root, 'bin', 'cog.mjs'), ...args], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  // The last OUTPUT_KEPT characters of what the platform printed, as chunks: the benches run it at
  // info, a line a request, and joining every chunk onto one 200 kB string copied it each time
  // (the load generator's CPU, on the cores the platform is measured on).
  const chunks: string[] = [];
  let kept = 0;
  const OUTPUT_KEPT = 200_000;
  const output = () => {
    const all = chunks.join('');
    return all.length > OUTPUT_KEPT ? all.slice(-OUTPUT_KEPT) : all;
  };
  const pids = new Map<string, number>();
  const restarts = new Map<string, number>();
  let partial = '';
  const onData = (d: Buffer) => {
    const chunk = d.toString();
    chunks.push(chunk);
    kept += chunk.length;
    while (chunks.length > 1 && kept - chunks[0]!.length >= OUTPUT_KEPT) kept -= chunks.shift()!.length;
    // Only the supervisor's lines are parsed: a chunk (and a line carried over) without one is skipped.
    if (!partial && !chunk.includes('[up] ')) {
      partial = chunk.slice(chunk.lastIndexOf('\n') + 1).slice(0, 200); // the line it ends in, if unfinished
      return;
    }
    const lines = (partial + chunk).split('\n');
    partial = (lines.pop() ?? '').slice(0, 200);
    for (const l of lines) {
      const m = /^\[up\] (\S+) pid (\d+)$/.exec(l);
      if (m) pids.set(m[1]!, Number(m[2]));
      const r = /^\[up\] (\S+) exited/.exec(l);
      if (r) restarts.set(r[1]!, (restarts.get(r[1]!) ?? 0) + 1);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const group = child.pid!;
  let stopped = false;

  const checks = (): Array<[string, () => Promise<boolean>]> =>
    Object.entries(urls).map(([name, u]) => [
      name,
      name === 'cortex'
        ? () =>
            ok(u, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
            })
        : () => ok(`${u}${name.startsWith('gateway') ? '/healthz' : '/health'}`),
    ]);

  const cluster: Cluster = {
    mode: o.mode,
    gateway: urls.gateway!,
    gateway2: urls.gateway2 ?? urls.gateway!,
    urls,
    dataDir,
    env,
    pid: child.pid!,
    output,
    pidOf: (name) => pids.get(name),
    restarts: (name) => restarts.get(name) ?? 0,
    async waitHealthy(timeoutMs, only) {
      const t0 = Date.now();
      const list = checks().filter(([n]) => !only || only.includes(n));
      let down: string[] = [];
      while (Date.now() - t0 < timeoutMs) {
        if (child.exitCode !== null) throw new Error(`the platform exited with ${child.exitCode}:\n${output().slice(-4000)}`);
        const results = await Promise.all(list.map(async ([n, f]) => [n, await f()] as const));
        down = results.filter(([, up]) => !up).map(([n]) => n);
        if (!down.length) return Date.now() - t0;
        await sleep(500);
      }
      // What the processes that never answered printed (all of it, not only the last lines, which
      // the other processes' warnings fill), then the tail of everything.
      const stem = (n: string) => n.replace(/-?\d+$/, '');
      const all = output();
      const theirs = all
        .split('\n')
        .filter((l) => down.some((n) => l.startsWith(`[${stem(n)}`) || l.startsWith(`[up] ${stem(n)}`)))
        .slice(-60)
        .join('\n');
      throw new Error(`not healthy after ${timeoutMs} ms (down: ${down.join(', ')}):\n${theirs}\n--- last output:\n${all.slice(-4000)}`);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      const alive = () => {
        try {
          process.kill(-group, 0);
          return true;
        } catch {
          return false;
        }
      };
      try {
        process.kill(-group, 'SIGTERM');
      } catch {
        /* already gone */
      }
      for (let i = 0; i < 40 && alive(); i++) await sleep(250);
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        /* gone */
      }
      await sleep(300);
      await db?.drop().catch(() => {});
      if (real) await cleanupNats(natsUrl, env.COG_NATS_STREAM!).catch(() => {});
      if (real) await cleanupRedis(redisUrl, env.COG_REDIS_PREFIX!).catch(() => {});
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return cluster;
}

async function cleanupNats(url: string, stream: string): Promise<void> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: url, timeout: 2000, reconnect: false });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 3000 });
    await jsm.streams.delete(stream).catch(() => {});
  } finally {
    await nc.close();
  }
}

async function cleanupRedis(url: string, prefix: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2000 });
  try {
    await r.connect();
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      cursor = next;
      if (keys.length) await r.del(...keys);
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
}

/** JSON over HTTP with a timeout; never throws for a status, only for a network failure. */
export async function call(method: string, url: string, body?: unknown, timeoutMs = 20_000): Promise<{ status: number; body: any; ms: number }> {
  const t0 = Date.now();
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: json, ms: Date.now() - t0 };
}
