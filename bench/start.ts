// Start and restart of the whole platform as `npm start` starts it: `node bin/cog.mjs start`
// (embedded defaults) on a fresh data dir (a first start: new database, new anvil chain, the
// contract suite deployed), stopped with SIGTERM once healthy, then started again on the same data
// dir (a restart). Time to healthy is from the spawn to the gateway's first 200 on /healthz (every
// service is up: the gateway starts last) and on /readyz (database, bus and Medulla's tip checked).
//   npx tsx bench/start.ts [rounds=3] [--profile=DIR] [--baseline=DIR]
// --baseline=DIR also times another checkout (an earlier commit's worktree, installed and
// generated), round by round in turn with this one, so both see the same machine load.
// --profile runs the platform under `node --cpu-prof --cpu-prof-dir=DIR` (written at its exit, so
// stopped right after it is healthy: the profile is the start); summarise each file with
// `npx tsx bench/profile-summary.ts <file>` (self time by area and function), or
// `npx tsx bench/cpuprofile.ts <file>` for the project's functions by inclusive time too.
// Targets (issue 13): first start at most 10 s, restart at most 3 s, on this 2-core machine.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PLATFORM_NODE_FLAGS } from '../bin/node-flags.ts';
import { shiftedPortsEnv } from '../bin/up.ts';
import { cpuMsOf } from './proc-cpu.ts';

/** Port shift of this bench's platforms (each test or bench has its own). */
export const START_BENCH_SHIFT = 16_000;
export const FIRST_START_TARGET_MS = 10_000;
export const RESTART_TARGET_MS = 3_000;

const root = path.resolve(import.meta.dirname, '..');

export interface StartTiming {
  /** Spawn to the first 200 on the gateway's /healthz. */
  healthyMs: number;
  /** Spawn to the first 200 on the gateway's /readyz. */
  readyMs: number;
  /** What the banner said ("up in X s"), measured inside the process from its own start. */
  bannerMs?: number;
  /** SIGTERM to exit. */
  stopMs: number;
  /** CPU time (user + system, every thread) the platform process had used when it was healthy; less sensitive to a loaded machine than the wall time. */
  cpuMs?: number;
}

async function answers(url: string): Promise<boolean> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  }
}

/** One `cog start` on dataDir: time to healthy and ready, then a clean stop. */
export async function timeStart(
  dataDir: string,
  opts: { shift?: number; nodeArgs?: string[]; env?: Record<string, string>; root?: string } = {},
): Promise<StartTiming> {
  const shift = opts.shift ?? START_BENCH_SHIFT;
  const ports = shiftedPortsEnv(shift);
  const gateway = `http://127.0.0.1:${ports.GATEWAY_PORT}`;
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^VITEST|^NODE_ENV$|^TEST$/.test(k))),
    ...ports,
    COG_DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    ...opts.env,
  } as Record<string, string>;
  const t0 = performance.now();
  const child: ChildProcess = spawn(
    process.execPath,
    [...PLATFORM_NODE_FLAGS, ...(opts.nodeArgs ?? []), path.join(opts.root ?? root, 'bin', 'cog.mjs'), 'start'],
    {
      cwd: opts.root ?? root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out = (out + d).slice(-100_000)));
  child.stderr!.on('data', (d) => (out = (out + d).slice(-100_000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    let healthyMs: number | undefined;
    let readyMs: number | undefined;
    let cpuMs: number | undefined;
    while (readyMs === undefined) {
      if (child.exitCode !== null) throw new Error(`the platform exited with ${child.exitCode}:\n${out.slice(-3000)}`);
      if (performance.now() - t0 > 180_000) throw new Error(`not healthy within 180 s:\n${out.slice(-3000)}`);
      if (healthyMs === undefined && (await answers(`${gateway}/healthz`))) {
        healthyMs = performance.now() - t0;
        cpuMs = cpuMsOf(child.pid!);
      }
      if (healthyMs !== undefined && (await answers(`${gateway}/readyz`))) readyMs = performance.now() - t0;
      else await new Promise((r) => setTimeout(r, 25));
    }
    const banner = /up in ([\d.]+) s/.exec(out);
    const s0 = performance.now();
    child.kill('SIGTERM');
    await exited;
    return { healthyMs: healthyMs!, readyMs, bannerMs: banner ? Number(banner[1]) * 1000 : undefined, stopMs: performance.now() - s0, cpuMs };
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

export function formatStartBench(first: StartTiming[], restart: StartTiming[], label = ''): string {
  const row = (label: string, xs: StartTiming[], target: number) => {
    const h = xs.map((x) => x.healthyMs);
    const r = xs.map((x) => x.readyMs);
    const b = xs.flatMap((x) => (x.bannerMs === undefined ? [] : [x.bannerMs]));
    const st = xs.map((x) => x.stopMs);
    const cpu = xs.flatMap((x) => (x.cpuMs === undefined ? [] : [x.cpuMs]));
    return (
      `| ${label.padEnd(20)} | ${String(xs.length).padStart(4)} | ${sec(median(h)).padStart(7)} (${sec(Math.min(...h))}–${sec(Math.max(...h))}) | ` +
      `${sec(median(r)).padStart(7)} | ${b.length ? sec(median(b)).padStart(7) : '      –'} | ${cpu.length ? sec(median(cpu)).padStart(7) : '      –'} | ${sec(median(st)).padStart(7)} | ${sec(target)} | ${(median(h) / target).toFixed(2)} |`
    );
  };
  return [
    '| start                | runs | healthy, median (min–max) | ready   | banner  | CPU     | stop    | target | healthy/target |',
    '|----------------------|------|---------------------------|---------|---------|---------|---------|--------|----------------|',
    row(`${label}first start`, first, FIRST_START_TARGET_MS),
    row(`${label}restart`, restart, RESTART_TARGET_MS),
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('bench/start.ts')) {
  const rounds = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 3);
  const profileDir = process.argv.find((a) => a.startsWith('--profile='))?.slice('--profile='.length);
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir)}`] : [];
  console.log(
    `start bench: node bin/cog.mjs start, embedded defaults (Node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)})`,
  );
  const baseline = process.argv.find((a) => a.startsWith('--baseline='))?.slice('--baseline='.length);
  const runs = [{ label: '', root }, ...(baseline ? [{ label: 'baseline ', root: path.resolve(baseline) }] : [])].map((r) => ({
    ...r,
    first: [] as StartTiming[],
    restart: [] as StartTiming[],
  }));
  for (let i = 0; i < rounds; i++) {
    for (const r of runs) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-start-bench-'));
      try {
        const a = await timeStart(dataDir, { nodeArgs, root: r.root });
        r.first.push(a);
        const b = await timeStart(dataDir, { nodeArgs, root: r.root });
        r.restart.push(b);
        console.log(
          `round ${i + 1}${r.label ? ` (${r.label.trim()})` : ''}: first start healthy ${sec(a.healthyMs)} (CPU ${sec(a.cpuMs ?? 0)}); restart healthy ${sec(b.healthyMs)} (CPU ${sec(b.cpuMs ?? 0)}) (load ${os.loadavg()[0].toFixed(1)})`,
        );
      } finally {
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    }
  }
  for (const r of runs) console.log(`\n${r.label ? `${r.label.trim()}: ${r.root}\n` : ''}${formatStartBench(r.first, r.restart, r.label)}`);
  if (profileDir) console.log(`\nprofiles in ${profileDir} (first start, restart, in turn; newest last)`);
}
