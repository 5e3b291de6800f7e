import { describe, expect, it } from 'vitest';
import { singleFlight } from './single-flight.ts';

const tick = () => new Promise((r) => setImmediate(r));

describe('singleFlight', () => {
  it('runs once at a time; calls during a run ask for exactly one more run, and settle after it', async () => {
    let runs = 0;
    let concurrent = 0;
    let most = 0;
    let release: (() => void) | undefined;
    const f = singleFlight(async () => {
      runs++;
      most = Math.max(most, ++concurrent);
      await new Promise<void>((r) => (release = r));
      concurrent--;
    });
    const first = f.run();
    await tick();
    const during = [f.run(), f.run(), f.run()];
    release!();
    await tick();
    expect(runs).toBe(2); // the re-run started
    let done = false;
    void Promise.all(during).then(() => (done = true));
    await tick();
    expect(done).toBe(false); // the calls made during the first run wait for the re-run
    release!();
    await first;
    await Promise.all(during);
    expect(runs).toBe(2);
    expect(most).toBe(1);
  });

  it('re-runs while the task says there is more, stops on an error, and runs nothing once stopped', async () => {
    let n = 0;
    const f = singleFlight(async () => ++n < 3);
    await f.run();
    expect(n).toBe(3);

    const errors: unknown[] = [];
    let m = 0;
    const g = singleFlight(
      async () => {
        m++;
        throw new Error('down');
      },
      { onError: (e) => errors.push(e) },
    );
    await g.run();
    expect([m, errors.length]).toEqual([1, 1]);

    let stopped = false;
    let k = 0;
    let afters = 0;
    const h = singleFlight(
      async () => {
        k++;
        stopped = true;
        return true;
      },
      { stopped: () => stopped, after: () => afters++ },
    );
    await h.run();
    await h.run();
    await h.settled();
    expect([k, afters]).toEqual([1, 1]);
  });
});
