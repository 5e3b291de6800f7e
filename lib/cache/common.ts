// Argument rules both cache adapters enforce, so a call that fails on Redis fails in memory too.

/** TTLs are positive milliseconds (Redis PX takes integers, so round up). */
export function checkTtl(ttlMs: number | undefined, required = false): number | undefined {
  if (ttlMs === undefined && !required) return undefined;
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new Error(`cache ttlMs must be a positive number of milliseconds, got ${ttlMs}`);
  }
  return Math.ceil(ttlMs);
}

export function checkKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) throw new Error('cache key must be a non-empty string');
}

export function checkValue(value: string): void {
  if (typeof value !== 'string') throw new Error('cache value must be a string');
}

/** Increments are positive safe integers (Redis INCRBY takes a 64-bit integer). */
export function checkBy(by: number): number {
  if (!Number.isSafeInteger(by) || by <= 0) throw new Error(`cache incr by must be a positive integer, got ${by}`);
  return by;
}

/** Redis's own message for INCR on a non-integer value. */
export const NOT_AN_INTEGER = 'ERR value is not an integer or out of range';
