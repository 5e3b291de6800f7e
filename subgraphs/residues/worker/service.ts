// The Worker Runner service: runs the six passes on every epoch advance, and sweeps for passes a
// dead runner left behind. No HTTP endpoint (spec: port "-").
import { started, type ServiceStarter } from '../../../lib/service.ts';
import { singleFlight } from '../../../lib/single-flight.ts';
import { createRunner, type RunnerOptions } from './runner.ts';

export function workerStarter(opts: RunnerOptions = {}): ServiceStarter {
  return async (p) => {
    const runner = createRunner(p, opts);
    // The current epoch's passes, then each later epoch's as it comes; those of the process's
    // start wait for it to be over (lib/service.ts started), in the same order.
    let closed = false;
    let held: number[] | undefined = [p.epochs.current()];
    const enqueue = (epoch: number) => (held ? held.push(epoch) : void runner.enqueue(epoch));
    const off = p.epochs.onAdvance((info) => void enqueue(info.epoch));
    void started(p).then(() => {
      const epochs = held ?? [];
      held = undefined;
      if (!closed) for (const e of epochs) void runner.enqueue(e);
    });
    // One sweep at a time: a tick while one runs asks for one more after it.
    const sweep = singleFlight(() => runner.sweep(), { onError: (e) => p.log.warn({ err: (e as Error).message }, 'worker: sweep failed') });
    const timer = setInterval(() => void sweep.run(), Math.max(250, Math.floor((opts.leaseMs ?? 3 * p.config.epochIntervalMs) / 2)));
    timer.unref();
    p.local.set('worker', runner);
    return {
      name: 'worker',
      async close() {
        closed = true;
        off();
        clearInterval(timer);
        await sweep.settled();
        await runner.idle();
        p.local.delete('worker');
      },
    };
  };
}

/** COG_RUNNER_ID names the runner in its leases (suffixed with the pid: each incarnation is its own holder). */
export const startWorker: ServiceStarter = (p) => workerStarter(p.config.runnerId ? { id: `${p.config.runnerId}:${process.pid}` } : {})(p);
