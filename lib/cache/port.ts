// The cache port: Redis (redis.ts) or memory (memory.ts). Small values, TTLs in ms.

export interface Cache {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlMs?: number): Promise<void>;
  /** Set only when absent (atomic across processes with Redis). True when it was set. */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean>;
  /** Remaining time to live in ms; -1 when the key has no TTL, -2 when it does not exist. */
  ttl(key: string): Promise<number>;
  /** Atomic increment by `by` (default 1); sets the TTL when the key is created. Returns the new value. */
  incr(key: string, ttlMs?: number, by?: number): Promise<number>;
  del(key: string): Promise<void>;
  close(): Promise<void>;
}
