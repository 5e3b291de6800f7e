import { describe, expect, it } from 'vitest';
import { timeSlicer } from './time-slice.ts';

/** Busy for `ms` of wall time, as a synchronous encoder is. */
const spin = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

/** Runs 40 items of 2 ms of synchronous work each, awaiting `between` after each; how often a 0 ms timer fired meanwhile. */
async function turns(between: () => Promise<void>): Promise<{ fired: number; longestMs: number }> {
  let fired = 0;
  let last = performance.now();
  let longestMs = 0;
  const timer = setInterval(() => {
    fired++;
    longestMs = Math.max(longestMs, performance.now() - last);
    last = performance.now();
  }, 0);
  try {
    last = performance.now();
    for (let i = 0; i < 40; i++) {
      spin(2);
      await between();
    }
    longestMs = Math.max(longestMs, performance.now() - last);
  } finally {
    clearInterval(timer);
  }
  return { fired, longestMs };
}

describe('timeSlicer', () => {
  it('lets timers run between items once a slice of work has run', async () => {
    const sliced = await turns(timeSlicer(10));
    // 80 ms of work in slices of 10: the timer gets a turn after each slice.
    expect(sliced.fired).toBeGreaterThanOrEqual(5);
    // No stretch as long as the whole run (80 ms), which is what the loop without it gives.
    expect(sliced.longestMs).toBeLessThan(80);
  });

  it('without it, awaiting promises alone never lets a timer in', async () => {
    const plain = await turns(async () => {});
    expect(plain.fired).toBe(0);
    expect(plain.longestMs).toBeGreaterThanOrEqual(80);
  });

  it('does not yield before a slice is used up', async () => {
    const next = timeSlicer(1000);
    let fired = false;
    const t = setImmediate(() => {
      fired = true;
    });
    for (let i = 0; i < 100; i++) await next();
    clearImmediate(t);
    expect(fired).toBe(false);
  });
});
