// In-process cache with Redis's semantics for the Cache port: lazy TTL expiry plus a periodic
// sweep so expired keys do not pile up. Every operation runs synchronously, hence atomically.
import type { Cache } from './port.ts';
import { NOT_AN_INTEGER, checkBy, checkKey, checkTtl, checkValue } from './common.ts';

interface Entry {
  value: string;
  /** Unix ms, or null for no TTL. */
  expiresAt: number | null;
}

export interface MemoryCacheOptions {
  /** How often expired keys are swept. Default 30 s. */
  sweepIntervalMs?: number;
}

export class MemoryCache implements Cache {
  private readonly entries = new Map<string, Entry>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(opts: MemoryCacheOptions = {}) {
    this.sweeper = setInterval(() => this.sweep(), opts.sweepIntervalMs ?? 30_000);
    this.sweeper.unref();
  }

  private live(key: string): Entry | undefined {
    if (this.closed) throw new Error('cache is closed');
    checkKey(key);
    const e = this.entries.get(key);
    if (e && e.expiresAt !== null && e.expiresAt <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [k, e] of this.entries) if (e.expiresAt !== null && e.expiresAt <= now) this.entries.delete(k);
  }

  async get(key: string): Promise<string | null> {
    return this.live(key)?.value ?? null;
  }

  async set(key: string, value: string, ttlMs?: number): Promise<void> {
    this.live(key);
    checkValue(value);
    const ttl = checkTtl(ttlMs);
    // Like SET without PX, a set without TTL clears an earlier one.
    this.entries.set(key, { value, expiresAt: ttl === undefined ? null : Date.now() + ttl });
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const existing = this.live(key);
    checkValue(value);
    const ttl = checkTtl(ttlMs, true)!;
    if (existing) return false;
    this.entries.set(key, { value, expiresAt: Date.now() + ttl });
    return true;
  }

  async ttl(key: string): Promise<number> {
    const e = this.live(key);
    if (!e) return -2;
    if (e.expiresAt === null) return -1;
    return Math.max(0, e.expiresAt - Date.now());
  }

  async incr(key: string, ttlMs?: number, by = 1): Promise<number> {
    const e = this.live(key);
    const ttl = checkTtl(ttlMs);
    checkBy(by);
    if (!e) {
      this.entries.set(key, { value: String(by), expiresAt: ttl === undefined ? null : Date.now() + ttl });
      return by;
    }
    const n = /^-?\d+$/.test(e.value) ? Number(e.value) : NaN;
    if (!Number.isSafeInteger(n) || !Number.isSafeInteger(n + by)) throw new Error(NOT_AN_INTEGER);
    e.value = String(n + by); // keeps its TTL, as INCRBY does
    return n + by;
  }

  async del(key: string): Promise<void> {
    this.live(key);
    this.entries.delete(key);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    this.entries.clear();
  }
}
