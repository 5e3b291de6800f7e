// Run once at a time, re-run on demand: the loop behind the event relay, the Cortex submitter and
// the other drains that a nudge, a timer and their own "there is more" all start. A call while a
// run is going does not start a second one: it asks for one more run after it (any number of calls
// during a run ask for one), and its promise settles when that run is over.

export interface SingleFlight {
  /** Runs the task now, or once more after the run going on; resolves when the run that covers this call ends. */
  run(): Promise<void>;
  /** The run going on (resolved when none is): what a close() awaits. */
  settled(): Promise<void>;
}

export interface SingleFlightOptions {
  /** A task that throws ends the run (a re-run asked for is dropped: the next call or timer starts again). */
  onError?: (e: unknown) => void;
  /** No run starts, and no re-run follows, once this is true. */
  stopped?: () => boolean;
  /** Called after each run ends (to arm a timer, say). */
  after?: () => void;
}

/** `task` resolving to true asks for one more run itself (a full batch: there may be more). */
export function singleFlight(task: () => Promise<unknown>, opts: SingleFlightOptions = {}): SingleFlight {
  let running: Promise<void> | null = null;
  let again = false;
  const stopped = () => opts.stopped?.() ?? false;
  const run = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    if (stopped()) return Promise.resolve();
    running = (async () => {
      do {
        again = false;
        if (stopped()) return;
        try {
          if ((await task()) === true) again = true;
        } catch (e) {
          opts.onError?.(e);
          return;
        }
      } while (again && !stopped());
    })().finally(() => {
      running = null;
      opts.after?.();
    });
    return running;
  };
  return { run, settled: () => running ?? Promise.resolve() };
}
