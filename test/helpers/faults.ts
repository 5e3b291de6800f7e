// The assertions every fault run shares: nothing acknowledged was lost, and clients saw only
// clear, retryable failures (no hangs, nothing else).
import { expect } from 'vitest';
import type { FaultReport, LoadResult } from '../../bench/load.ts';

/** More than 20 writes were acknowledged during the run and every one of them is still readable. */
export function expectNothingLost(r: FaultReport): void {
  expect(r.acknowledged).toBeGreaterThan(20);
  expect(r.lostCids).toEqual([]);
  expect(r.lost).toBe(0);
}

/** Every client error was retryable (503 or a refused connection), none a hang. */
export function expectRetryableOnly(load: LoadResult): void {
  expect(load.byClass.other, load.samples.join('\n')).toBe(0);
  expect(load.byClass.hang).toBe(0);
}
