// `cog up --distributed`: every service as its own process (`cog service <name>`) against real
// infrastructure (DATABASE_URL, NATS_URL, REDIS_URL; S3_ENDPOINT when set), supervised: a process
// that exits is restarted with backoff. Two Medulla and two Hippocampus nodes peer with each other;
// the gateway, faucet, worker and sleeve runtime run twice behind their shared state; every Hippocampus client has
// the other node as fallback (HIPPOCAMPUS_FALLBACK_URLS). deploy/Procfile and
// deploy/compose.yaml describe the same topology for real hosts.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../lib/config.ts';
import { internalAuthHeaders } from '../lib/internal-client.ts';
import { PLATFORM_NODE_FLAGS } from './node-flags.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface ProcessSpec {
  name: string;
  service: string;
  env: Record<string, string>;
}

/** The distributed topology; every URL on loopback. */
export function topology(cfg: Config): ProcessSpec[] {
  const p = cfg.ports;
  const m2 = p.medulla + 1;
  const h2 = p.hippocampus + 1;
  const local = (port: number) => `http://127.0.0.1:${port}`;
  // Every process that reaches the Hippocampus over HTTP has both nodes: its primary, then the
  // other as fallback. Gateway-2 and worker-2 prefer hippocampus-2, the rest hippocampus-1.
  const via1 = { HIPPOCAMPUS_FALLBACK_URLS: local(h2) };
  const via2 = { HIPPOCAMPUS_URL: local(h2), HIPPOCAMPUS_FALLBACK_URLS: local(p.hippocampus) };
  const ops = opsPorts(cfg);
  const specs: ProcessSpec[] = [
    { name: 'cortex', service: 'cortex', env: { COG_OPS_PORT: String(ops.cortex) } },
    { name: 'medulla-1', service: 'medulla', env: { MEDULLA_NODE_ID: 'medulla-1', MEDULLA_PEERS: local(m2) } },
    {
      name: 'medulla-2',
      service: 'medulla',
      env: { MEDULLA_NODE_ID: 'medulla-2', MEDULLA_PORT: String(m2), MEDULLA_PEERS: local(p.medulla), MEDULLA_AUTOMINE: 'off' },
    },
    { name: 'hippocampus-1', service: 'hippocampus', env: { HIPPOCAMPUS_NODE_ID: 'hippocampus-1', HIPPOCAMPUS_PEERS: local(h2) } },
    {
      name: 'hippocampus-2',
      service: 'hippocampus',
      env: { HIPPOCAMPUS_NODE_ID: 'hippocampus-2', HIPPOCAMPUS_PORT: String(h2), HIPPOCAMPUS_PEERS: local(p.hippocampus) },
    },
    { name: 'thalamus', service: 'thalamus', env: { ...via1 } },
    { name: 'dhf', service: 'dhf', env: { ...via1 } },
    { name: 'treasury', service: 'treasury', env: {} },
    { name: 'faucet-1', service: 'faucet', env: {} },
    { name: 'faucet-2', service: 'faucet', env: { FAUCET_PORT: String(p.faucet + 100) } },
    { name: 'needlecast', service: 'needlecast', env: { ...via1 } },
    // Two sleeve runtimes share the alive sleeves by leases (docs/scale.md); each serves the identity
    // of the sleeves it runs on a free port (the sleeve row names it).
    {
      name: 'sleeve-runtime-1',
      service: 'sleeve-runtime',
      env: { COG_SLEEVE_RUNTIME_ID: 'sleeve-runtime-1', COG_OPS_PORT: String(ops['sleeve-runtime-1']), ...via1 },
    },
    {
      name: 'sleeve-runtime-2',
      service: 'sleeve-runtime',
      env: { COG_SLEEVE_RUNTIME_ID: 'sleeve-runtime-2', COG_OPS_PORT: String(ops['sleeve-runtime-2']), ...via2 },
    },
    { name: 'worker-1', service: 'worker', env: { COG_RUNNER_ID: 'worker-1', COG_OPS_PORT: String(ops['worker-1']), ...via1 } },
    { name: 'worker-2', service: 'worker', env: { COG_RUNNER_ID: 'worker-2', COG_OPS_PORT: String(ops['worker-2']), ...via2 } },
    ...['stacks', 'sleeves', 'memory', 'chains', 'economy', 'residues'].map((sg) => ({
      name: `subgraph-${sg}`,
      service: `subgraph-${sg}`,
      env: sg === 'memory' || sg === 'residues' ? { ...via1 } : {},
    })),
    { name: 'gateway-1', service: 'gateway', env: { COG_SUBGRAPHS: 'remote', ...via1 } },
    { name: 'gateway-2', service: 'gateway', env: { COG_SUBGRAPHS: 'remote', GATEWAY_PORT: String(p.gateway + 100), ...via2 } },
  ];
  // Each process's PostgreSQL pool, so the whole topology (70 connections) fits a stock server's
  // max_connections of 100 with room for tooling; the gateways run the REST API's domain code.
  return specs.map((s) => ({ ...s, env: { ...s.env, DATABASE_POOL_SIZE: String(POOL_SIZES[s.service] ?? 2) } }));
}

/**
 * The ops ports (COG_OPS_PORT: /healthz, /readyz, /metrics) of the processes that serve no HTTP of
 * their own: the gateway's port + 20 onwards (7090-7094 unshifted).
 */
export function opsPorts(cfg: Config): Record<'cortex' | 'sleeve-runtime-1' | 'worker-1' | 'worker-2' | 'sleeve-runtime-2', number> {
  const g = cfg.ports.gateway;
  return { cortex: g + 20, 'sleeve-runtime-1': g + 21, 'worker-1': g + 22, 'worker-2': g + 23, 'sleeve-runtime-2': g + 24 };
}

/** Connections per process (DATABASE_POOL_SIZE); an operator's DATABASE_POOL_SIZE overrides them all. */
export const POOL_SIZES: Record<string, number> = {
  gateway: 8,
  medulla: 3,
  hippocampus: 3,
  thalamus: 3,
  needlecast: 3,
  worker: 3,
  'subgraph-stacks': 3,
  'subgraph-sleeves': 3,
  'subgraph-memory': 3,
  'subgraph-chains': 3,
  'subgraph-economy': 3,
  'subgraph-residues': 3,
  cortex: 2,
  dhf: 2,
  treasury: 2,
  faucet: 2,
  'sleeve-runtime': 2,
};

/** Spec ports and subgraph ports of the topology; the second nodes sit at +1 and +100 of these. */
export const BASE_PORTS = {
  GATEWAY_PORT: 7070,
  NEEDLECAST_PORT: 7071,
  THALAMUS_PORT: 7072,
  DHF_PORT: 7073,
  TREASURY_PORT: 7074,
  FAUCET_PORT: 7075,
  MEDULLA_PORT: 8332,
  HIPPOCAMPUS_PORT: 5001,
  CORTEX_PORT: 8545,
} as const;
export const SUBGRAPH_PORTS = { stacks: 7081, sleeves: 7082, memory: 7083, chains: 7084, economy: 7085, residues: 7086 } as const;

/**
 * The environment that moves the whole topology by `shift` ports (tests and benchmarks run beside
 * a developer's platform): every *_PORT, and each subgraph's port and the URL the router uses.
 */
export function shiftedPortsEnv(shift: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(BASE_PORTS)) env[k] = String(v + shift);
  for (const [name, port] of Object.entries(SUBGRAPH_PORTS)) {
    env[`SUBGRAPH_${name.toUpperCase()}_PORT`] = String(port + shift);
    env[`SUBGRAPH_${name.toUpperCase()}_URL`] = `http://127.0.0.1:${port + shift}/graphql`;
  }
  return env;
}

/** Where each process of the topology answers GET /readyz (its service port, or its COG_OPS_PORT). */
export function readinessUrls(cfg: Config, env: Record<string, string | undefined> = process.env): Array<{ name: string; url: string }> {
  return topology(cfg).map((s) => {
    const e = s.env;
    const sg = s.service.startsWith('subgraph-') ? (s.service.slice('subgraph-'.length) as keyof typeof SUBGRAPH_PORTS) : undefined;
    const port =
      e.COG_OPS_PORT ??
      e.MEDULLA_PORT ??
      e.HIPPOCAMPUS_PORT ??
      e.FAUCET_PORT ??
      e.GATEWAY_PORT ??
      (sg ? (env[`SUBGRAPH_${sg.toUpperCase()}_PORT`] ?? String(SUBGRAPH_PORTS[sg])) : String(cfg.ports[s.service as keyof Config['ports']]));
    return { name: s.name, url: `http://127.0.0.1:${port}/readyz` };
  });
}

/** Each process's readiness: undefined when ready, else what is down (or why it did not answer). */
export async function readiness(cfg: Config): Promise<Array<{ name: string; down?: string }>> {
  const headers = internalAuthHeaders(cfg.internalToken);
  return Promise.all(
    readinessUrls(cfg).map(async ({ name, url }) => {
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(3000) });
        if (res.ok) {
          await res.body?.cancel();
          return { name };
        }
        const body = (await res.json().catch(() => ({}))) as { detail?: string };
        return { name, down: body.detail ?? `status ${res.status}` };
      } catch (e) {
        return { name, down: `no answer (${(e as Error).name === 'TimeoutError' ? 'timeout' : 'not listening'})` };
      }
    }),
  );
}

/**
 * Creates the PostgreSQL database DATABASE_URL names when it does not exist yet, and warns when the
 * topology's pools could take more connections than the server allows (best effort).
 */
async function ensureDatabase(databaseUrl: string, connections: number): Promise<void> {
  const u = new URL(databaseUrl);
  const name = decodeURIComponent(u.pathname.replace(/^\//, ''));
  if (!name || !/^[A-Za-z0-9_]+$/.test(name)) return;
  const { default: pg } = await import('pg');
  u.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: u.toString() });
  try {
    await admin.connect();
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      await admin.query(`CREATE DATABASE "${name}"`);
      process.stdout.write(`[up] created database ${name}\n`);
    }
    const max = Number((await admin.query('SHOW max_connections')).rows[0]?.max_connections);
    if (max && connections > max - 5) {
      process.stderr.write(
        `[up] the processes' pools may open ${connections} connections but the server allows ${max}: raise max_connections or lower DATABASE_POOL_SIZE\n`,
      );
    }
  } catch (e) {
    process.stderr.write(`[up] could not check database ${name}: ${(e as Error).message}\n`);
  } finally {
    await admin.end().catch(() => {});
  }
}

export async function upDistributed(cfg: Config): Promise<void> {
  const missing = (['DATABASE_URL', 'NATS_URL', 'REDIS_URL'] as const).filter((v) => !process.env[v]);
  if (missing.length) {
    process.stderr.write(
      `cog up --distributed needs real infrastructure: set ${missing.join(', ')} (for example DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cog NATS_URL=nats://127.0.0.1:4222 REDIS_URL=redis://127.0.0.1:6379)\n`,
    );
    process.exit(1);
  }
  if (!process.env.COG_MASTER_KEY) {
    process.stderr.write(
      'cog up --distributed: COG_MASTER_KEY unset; every process reads the key file under COG_DATA_DIR, so they must share that directory\n',
    );
  }
  const specs = topology(cfg);
  const override = process.env.DATABASE_POOL_SIZE ? cfg.databasePoolSize : undefined;
  await ensureDatabase(
    process.env.DATABASE_URL!,
    specs.reduce((n, s) => n + (override ?? Number(s.env.DATABASE_POOL_SIZE)), 0),
  );
  const children = new Map<string, ChildProcess>();
  let stopping = false;
  const start = (spec: ProcessSpec, attempt = 0) => {
    const child = spawn(process.execPath, [...PLATFORM_NODE_FLAGS, path.join(root, 'bin', 'cog.mjs'), 'service', spec.service], {
      cwd: root,
      env: {
        ...process.env,
        ...spec.env,
        ...(process.env.DATABASE_POOL_SIZE ? { DATABASE_POOL_SIZE: process.env.DATABASE_POOL_SIZE } : {}),
        COG_DATA_DIR: cfg.dataDir,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.set(spec.name, child);
    process.stdout.write(`[up] ${spec.name} pid ${child.pid}\n`);
    const prefix = (chunk: Buffer) =>
      chunk
        .toString()
        .split('\n')
        .filter(Boolean)
        .map((l) => `[${spec.name}] ${l}\n`)
        .join('');
    child.stdout!.on('data', (c: Buffer) => process.stdout.write(prefix(c)));
    child.stderr!.on('data', (c: Buffer) => process.stderr.write(prefix(c)));
    const startedAt = Date.now();
    child.on('exit', (code, signal) => {
      if (stopping) return;
      const next = Date.now() - startedAt > 30_000 ? 0 : attempt + 1;
      const delay = Math.min(30_000, 250 * 2 ** Math.min(next, 7));
      process.stderr.write(`[up] ${spec.name} exited (${signal ?? code}); restarting in ${delay} ms\n`);
      setTimeout(() => start(spec, next), delay).unref();
    });
  };
  for (const spec of specs) start(spec);
  const stop = () => {
    stopping = true;
    for (const c of children.values()) c.kill('SIGTERM');
    setTimeout(() => process.exit(0), 5000).unref();
    let left = children.size;
    for (const c of children.values()) c.once('exit', () => --left === 0 && process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  process.stdout.write(`[up] started ${children.size} processes; gateway ${cfg.urls.base}, second gateway http://127.0.0.1:${cfg.ports.gateway + 100}\n`);
  // Readiness (GET /readyz of every process): one line when all are ready, then one per change.
  const t0 = Date.now();
  let ready = false;
  const notReady = new Map<string, string>();
  for (;;) {
    await new Promise((r) => setTimeout(r, ready ? 5000 : 1000));
    if (stopping) continue;
    const states = await readiness(cfg);
    const down = states.filter((s) => s.down);
    if (!ready) {
      if (down.length) continue;
      ready = true;
      process.stdout.write(`[up] ready: all ${states.length} processes (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
      continue;
    }
    for (const s of states) {
      if (s.down && notReady.get(s.name) !== s.down) process.stderr.write(`[up] ${s.name} not ready: ${s.down}\n`);
      if (!s.down && notReady.has(s.name)) process.stdout.write(`[up] ${s.name} ready again\n`);
      if (s.down) notReady.set(s.name, s.down);
      else notReady.delete(s.name);
    }
  }
}
