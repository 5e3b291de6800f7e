// The Worker Runner: the six passes once per epoch each, in spec order. Several runners may share
// one database: the PassRun lease makes each (pass, epoch) run once in total, and a runner's
// sweep takes over leases a dead runner left unfinished.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Platform } from '../../../lib/platform.ts';
import { acquirePass, failPass, finishPass, staleLeases } from './lease.ts';
import { workerPasses, type Pass } from './pass-port.ts';
import { passDuration } from '../../../lib/metrics.ts';

export type PassStatus = 'ran' | 'skipped' | 'failed';

export interface RunnerOptions {
  id?: string;
  /** An unfinished lease older than this is presumed dead and taken over. */
  leaseMs?: number;
  passes?: ReadonlyArray<readonly [string, Pass]>;
  /** Epochs back that a sweep or a late start still catches up on. */
  catchUpEpochs?: number;
}

export interface Runner {
  id: string;
  runPass(name: string, epoch: number): Promise<PassStatus>;
  runEpoch(epoch: number): Promise<Record<string, PassStatus>>;
  /** Runs passes whose lease holder died (unfinished past the lease timeout). */
  sweep(): Promise<number>;
  /** Queues an epoch; epochs run one after another, in order. */
  enqueue(epoch: number): Promise<void>;
  idle(): Promise<void>;
}

export function createRunner(p: Platform, opts: RunnerOptions = {}): Runner {
  const id = opts.id ?? `worker:${os.hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const leaseMs = opts.leaseMs ?? Math.max(10_000, 3 * p.config.epochIntervalMs);
  const passes = new Map(opts.passes ?? workerPasses(p));
  const catchUp = opts.catchUpEpochs ?? 8;
  let chain: Promise<void> = Promise.resolve();
  let last = -1;

  async function runPass(name: string, epoch: number): Promise<PassStatus> {
    const pass = passes.get(name);
    if (!pass) throw new Error(`unknown pass ${name}`);
    if (!(await acquirePass(p, name, epoch, id, leaseMs))) return 'skipped';
    const t0 = performance.now();
    try {
      const result = await pass(p, epoch);
      await finishPass(p, name, epoch, id, result);
      passDuration.observe({ pass: name, status: 'ran' }, (performance.now() - t0) / 1000);
      return 'ran';
    } catch (e) {
      passDuration.observe({ pass: name, status: 'failed' }, (performance.now() - t0) / 1000);
      p.log.error({ pass: name, epoch, err: (e as Error).message }, 'worker: pass failed; another runner retries after the lease');
      await failPass(p, name, epoch, id, (e as Error).message).catch(() => {});
      return 'failed';
    }
  }

  async function runEpoch(epoch: number): Promise<Record<string, PassStatus>> {
    const out: Record<string, PassStatus> = {};
    for (const name of passes.keys()) out[name] = await runPass(name, epoch);
    return out;
  }

  async function sweep(): Promise<number> {
    const stale = await staleLeases(p, leaseMs, Math.max(0, p.epochs.current() - catchUp));
    let ran = 0;
    for (const s of stale) if (passes.has(s.pass) && (await runPass(s.pass, s.epoch)) === 'ran') ran++;
    return ran;
  }

  function enqueue(epoch: number): Promise<void> {
    chain = chain
      .then(async () => {
        // Catch up on epochs missed while busy or down, but not further back than catchUpEpochs.
        const from = last < 0 ? epoch : Math.max(last + 1, epoch - catchUp);
        for (let e = from; e <= epoch; e++) {
          await runEpoch(e);
          last = Math.max(last, e);
        }
      })
      .catch((e) => p.log.error({ err: (e as Error).message }, 'worker: epoch run failed'));
    return chain;
  }

  return { id, runPass, runEpoch, sweep, enqueue, idle: () => chain };
}
