// CPU time of processes on this machine, from Linux's /proc (undefined or 0 elsewhere): the benches
// report CPU a request beside req/s, since a shared 2-core machine's rates swing run to run and the
// CPU each request costs swings less.
import fs from 'node:fs';

/** Linux's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux Node runs on. */
const TICKS_PER_SECOND = 100;

/** A process's command name and CPU ms so far (user + system, every thread), from one read of its stat file. */
function readStat(pid: number | string): { name: string; ms: number } | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const f = stat.slice(close + 2).split(' '); // after the command name: state is field 0, utime 11, stime 12
    return { name: stat.slice(stat.indexOf('(') + 1, close), ms: ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND };
  } catch {
    return undefined;
  }
}

/** CPU ms so far (user + system, every thread) of a process; undefined off Linux or once it is gone. */
export function cpuMsOf(pid: number): number | undefined {
  return readStat(pid)?.ms;
}

/** CPU ms so far of each process named `name` (PostgreSQL's backends, WAL writer, checkpointer: `postgres`), by pid. */
export function cpuMsByPid(name: string): Map<number, number> {
  const out = new Map<number, number>();
  let pids: string[];
  try {
    pids = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    const st = readStat(pid);
    if (st?.name === name) out.set(Number(pid), st.ms);
  }
  return out;
}

/** CPU ms the processes named `name` spent since `before` (a process that started since counts whole; one that exited is not counted). */
export function cpuMsSince(before: Map<number, number>, name: string): number {
  let total = 0;
  for (const [pid, ms] of cpuMsByPid(name)) total += ms - (before.get(pid) ?? 0);
  return total;
}

/**
 * A thread's scheduler times so far (ms), from Linux's /proc/<pid>/task/<tid>/schedstat: on a core,
 * and runnable but waiting for one (undefined off Linux, or without schedstats). The main thread of
 * a process is the task whose id is the pid: the platform's event loop, which a saturated machine
 * makes wait behind the database and the client even while it has work.
 */
export function schedMsOf(pid: number, tid = pid): { runMs: number; waitMs: number } | undefined {
  try {
    const [run, wait] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return Number.isFinite(run) && Number.isFinite(wait) ? { runMs: run! / 1e6, waitMs: wait! / 1e6 } : undefined;
  } catch {
    return undefined;
  }
}
