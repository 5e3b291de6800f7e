// The `cog` CLI (loaded by bin/cog.mjs through tsx):
//   cog start               every service in one process on embedded defaults (npm start)
//   cog service <name>      one service per process (distributed); `cog services` lists names
//   cog up --distributed    every service as its own supervised process on real infrastructure
//   cog ready               the readiness (/readyz) of every process of that topology
//   cog deploy              deploy the Cortex contract suite (idempotent)
//   cog mcp                 the MCP server over stdio, for a running gateway (mcp/stdio.ts)
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { loadConfig, ConfigError, type Config } from '../lib/config.ts';
import { createLogger } from '../lib/log.ts';
import { openPlatform, closePlatform, type Platform } from '../lib/platform.ts';
import { startEventRelay } from '../lib/events.ts';
import { precompilePglite } from '../lib/db/index.ts';
import { startTableCare } from '../lib/db/table-care.ts';
import { stopTracing } from '../lib/tracing.ts';
import { holdStart, type RunningService } from '../lib/service.ts';
import { runsTableCare, SERVICES } from './services.ts';
import { createHttp, listen } from '../lib/http.ts';
import { startProgress } from './progress.ts';
import { mountReadiness } from '../lib/ready.ts';

const USAGE = `usage: cog <command>
  start                 run the whole platform in one process (embedded defaults)
  service <name>        run one service (see: cog services)
  services              list service names
  up --distributed      run every service as its own process against DATABASE_URL, NATS_URL, REDIS_URL
  ready                 check /readyz of every process of the distributed topology (exit 1 when one is not ready)
  deploy                deploy the Cortex contract suite and write deployments/<chainId>.json
  mcp [--base-url URL]  MCP server over stdio for a running gateway (cog mcp --help)
  help                  this text
client commands (against a running platform, through the SDK):
  stack create|show     create a stack (its key is kept in ~/.cog/keys) or show one
  sleeve spawn|list|rm  spawn, list or decommission sleeves
  perceive, remember, recall   write and read memory
  needlecast            move a stack's running state, a line per saga step
  faucet                drip development tokens to the stack
  watch <subscription>  live events (a subscription name, or events for /v1/events)
  status                services, epoch and tip age
  each client command takes --help, --json and --url`;

function fail(msg: string): never {
  process.stderr.write(`cog: ${msg}\n`);
  process.exit(1);
}

function config(): Config {
  try {
    return loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) fail(`bad configuration: ${e.message}`);
    throw e;
  }
}

/** Resolves when the port can be bound on the host, rejects naming it otherwise. */
function portFree(host: string, port: number, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        new Error(
          e.code === 'EADDRINUSE'
            ? `${name}: port ${port} is already in use (set its *_PORT variable or stop the other process)`
            : `${name}: cannot listen on ${host}:${port}: ${e.message}`,
        ),
      ),
    );
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve()));
  });
}

/** One platform process per embedded data dir: PGlite must not be opened twice. */
function lockDataDir(cfg: Config): () => void {
  if (cfg.databaseUrl) return () => {};
  fs.mkdirSync(cfg.dataDir, { recursive: true });
  const file = path.join(cfg.dataDir, 'LOCK');
  try {
    const pid = Number(fs.readFileSync(file, 'utf8'));
    if (pid && pid !== process.pid) {
      process.kill(pid, 0); // throws when that process is gone
      fail(`data dir ${cfg.dataDir} is in use by process ${pid}; stop it or set COG_DATA_DIR`);
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT' && (e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
  fs.writeFileSync(file, String(process.pid));
  return () => fs.rmSync(file, { force: true });
}

/** Starts the named services in registry order on one platform; stops them all on a signal. */
async function run(names: string[], banner: boolean): Promise<void> {
  const cfg = config();
  const log = createLogger({ level: cfg.logLevel, format: cfg.logFormat, name: 'cog' });
  const t0 = Date.now();
  const entries = SERVICES.filter((s) => names.includes(s.name));
  const unlock = lockDataDir(cfg);
  try {
    for (const e of entries) if (e.port && e.port(cfg) !== 0) await portFree(cfg.host, e.port(cfg), e.name);
  } catch (e) {
    unlock();
    fail((e as Error).message);
  }
  // On a terminal the banner shows each stage as it happens (a first start deploys the contracts).
  const progress = banner && process.stdout.isTTY ? startProgress(process.stdout, t0) : undefined;
  if (progress) process.stdout.write(`Cognitive Agent Platform v3: starting (data: ${cfg.dataDir})\n`);
  // What can begin before the stores open (Cortex's anvil) begins first; a failure there is the
  // service's own start's to report.
  for (const e of entries) e.prepare?.(cfg).catch(() => {});
  if (!cfg.databaseUrl && !cfg.pgliteThread) void precompilePglite();
  progress?.stage('platform', 'opening the database, bus, cache and object store');
  // Every service's modules load while the stores open (the database's start is partly off the
  // main thread), not one service at a time once the others run: a service's loops (outbox
  // polls, epoch passes, ticks) would share the CPU with each later service's module loading.
  const loaded = new Map(entries.map((e) => [e.name, e.load()]));
  for (const l of loaded.values()) l.catch(() => {}); // reported when that service starts
  let platform: Platform;
  try {
    platform = await openPlatform(cfg, { log, medullaInProcess: names.includes('medulla') });
  } catch (e) {
    fail(`could not open the platform's stores: ${(e as Error).message}`);
  }
  // The loops that can wait (lib/service.ts started) begin once every service is up.
  const releaseStart = holdStart(platform);
  const relay = startEventRelay(platform);
  const tableCare = runsTableCare(platform.db.kind, names) ? startTableCare(platform.db, log, platform.config.tableCare) : undefined;
  const running: RunningService[] = [];
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log.info('stopping');
    for (const s of [...running].reverse()) {
      await s.close().catch((e) => log.warn({ service: s.name, err: (e as Error).message }, 'close failed'));
    }
    await relay.close();
    await tableCare?.close();
    await closePlatform(platform);
    unlock();
    await stopTracing();
    process.exit(code);
  };
  process.once('SIGINT', () => void stop(0));
  process.once('SIGTERM', () => void stop(0));
  const { wirePlatform, wireLocalService } = await import('./assembly.ts');
  wirePlatform(platform);
  const order = new Map<RunningService, number>();
  const startOne = async (entry: (typeof entries)[number]) => {
    try {
      progress?.stage(entry.name, 'starting');
      const start = await loaded.get(entry.name)!;
      const svc = await start(platform);
      // Kept in registry order whatever order the starts end in: the stop closes them in reverse.
      order.set(svc, entries.indexOf(entry));
      running.push(svc);
      running.sort((a, b) => order.get(a)! - order.get(b)!);
      platform.local.set(entry.name, svc);
      progress?.up(entry.name, svc.url);
      wireLocalService(platform, entry.name, svc);
    } catch (e) {
      throw new Error(`${entry.name} failed to start: ${(e as Error).message}`);
    }
  };
  // Entries with joinBefore start beside the next ones (bin/services.ts).
  const beside = new Map<string, Promise<void>>();
  const join = async (names: string[]) => {
    for (const n of names) {
      await beside.get(n);
      beside.delete(n);
    }
  };
  try {
    for (const entry of entries) {
      await join(entries.filter((e) => e.joinBefore === entry.name && beside.has(e.name)).map((e) => e.name));
      if (entry.joinBefore && names.includes(entry.joinBefore)) {
        const started = startOne(entry);
        started.catch(() => {}); // reported when joined
        beside.set(entry.name, started);
      } else await startOne(entry);
    }
    await join([...beside.keys()]);
  } catch (e) {
    process.stderr.write(`cog: ${(e as Error).message}\n`);
    await join([...beside.keys()]).catch(() => {}); // nothing half-started outlives the stop
    await stop(1);
    return;
  }
  releaseStart();
  if (cfg.opsPort !== undefined) {
    // Services without an HTTP endpoint of their own (worker, sleeve runtime, Cortex) are observed here.
    try {
      running.push(await startOps(platform, names.join(',')));
    } catch (e) {
      process.stderr.write(`cog: ops endpoint failed to start: ${(e as Error).message}\n`);
      await stop(1);
      return;
    }
  }
  progress?.close();
  if (banner) {
    const lines = running.map((s) => `  ${s.name.padEnd(15)} ${s.url ?? '(no HTTP endpoint)'}`);
    process.stdout.write(
      `\nCognitive Agent Platform v3 — up in ${((Date.now() - t0) / 1000).toFixed(1)} s (data: ${cfg.dataDir})\n${lines.join('\n')}\n` +
        `  GraphQL         ${cfg.urls.base}/graphql\n  REST            ${cfg.urls.base}/v1\n  events (WS)     ws://127.0.0.1:${cfg.ports.gateway}/v1/events\n\nCtrl-C stops it.\n`,
    );
  }
}

/** COG_OPS_PORT: /healthz and /metrics for a process whose services serve no HTTP themselves. */
async function startOps(p: Platform, name: string): Promise<RunningService> {
  const app = createHttp({ name: 'ops', log: p.log, internalToken: p.config.internalToken });
  app.get('/healthz', async () => ({ ok: true, name, ts: Date.now() }));
  mountReadiness(app, p, { name, needs: ['database', 'bus', 'medulla', ...(name.split(',').includes('cortex') ? ['cortex' as const] : [])] });
  const port = await listen(app, `${name} ops`, p.config.host, p.config.opsPort!);
  return { name: 'ops', url: `http://${p.config.host}:${port}`, close: () => app.close() };
}

/**
 * `cog generate`'s part that needs the platform's code (bin/cog.mjs calls it after the Prisma
 * client, the inspector and the precompiled platform): the migrated PGlite template a first start
 * copies (lib/db/template.ts).
 */
export async function generate(): Promise<void> {
  const { ensureTemplate } = await import('../lib/db/template.ts');
  await ensureTemplate();
}

export async function main(args: string[]): Promise<void> {
  const [cmd, ...rest] = args;
  switch (cmd ?? 'help') {
    case 'start':
      return run(
        SERVICES.filter((s) => !s.distributedOnly).map((s) => s.name),
        true,
      );
    case 'service': {
      const name = rest[0];
      if (!name || !SERVICES.some((s) => s.name === name)) fail(`unknown service "${name ?? ''}"; one of: ${SERVICES.map((s) => s.name).join(', ')}`);
      return run([name], false);
    }
    case 'services':
      for (const s of SERVICES) process.stdout.write(`${s.name.padEnd(15)} ${s.describe}\n`);
      return;
    case 'up': {
      if (!rest.includes('--distributed')) fail('usage: cog up --distributed');
      const { upDistributed } = await import('./up.ts');
      return upDistributed(config());
    }
    case 'ready': {
      const { readiness } = await import('./up.ts');
      const states = await readiness(config());
      for (const s of states) process.stdout.write(`${s.name.padEnd(16)} ${s.down ? `NOT READY: ${s.down}` : 'ready'}\n`);
      if (states.some((s) => s.down)) process.exit(1);
      return;
    }
    case 'deploy': {
      const { deployCommand } = await import('../subgraphs/chains/index.ts');
      await deployCommand(config());
      return;
    }
    case 'mcp': {
      const { runMcpStdio } = await import('../mcp/stdio.ts');
      return runMcpStdio(rest);
    }
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE + '\n');
      return;
    default:
      fail(`unknown command "${cmd}"\n${USAGE}`);
  }
}
