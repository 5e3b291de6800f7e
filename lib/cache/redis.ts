// The Cache port over Redis (ioredis). setIfAbsent is SET NX PX; incr is one Lua script so the TTL
// is set exactly when the key is created, atomically across processes. An optional key prefix
// keeps tests (or several platforms) apart on one Redis.
import { Redis } from 'ioredis';
import type { Cache } from './port.ts';
import { unavailable } from '../errors.ts';
import { checkBy, checkKey, checkTtl, checkValue } from './common.ts';

export interface RedisCacheOptions {
  /** Prepended to every key, e.g. `cog:` or a per-test prefix. */
  keyPrefix?: string;
}

const INCR_TTL_ON_CREATE = `
local created = redis.call('EXISTS', KEYS[1]) == 0
local v = redis.call('INCRBY', KEYS[1], ARGV[2])
if created and tonumber(ARGV[1]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return v`;

type WithIncr = Redis & { incrTtl(key: string, ttlMs: number, by: number): Promise<number> };

/** Redis URLs may carry a password: never echo one. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(invalid URL)';
  }
}

export class RedisCache implements Cache {
  private readonly redis: WithIncr;

  constructor(url: string, opts: RedisCacheOptions = {}) {
    const redis = new Redis(url, {
      keyPrefix: opts.keyPrefix,
      lazyConnect: true,
      // Fail commands quickly during an outage instead of queueing them for long; reconnects go on.
      maxRetriesPerRequest: 2,
      connectTimeout: 5_000,
    });
    redis.on('error', () => {
      // Connection errors surface as rejected commands; without a listener ioredis prints them.
    });
    redis.defineCommand('incrTtl', { numberOfKeys: 1, lua: INCR_TTL_ON_CREATE });
    this.redis = redis as WithIncr;
  }

  /** Connects first so a wrong URL fails at start with a clear message. */
  static async connect(url: string, opts: RedisCacheOptions = {}): Promise<RedisCache> {
    const cache = new RedisCache(url, opts);
    try {
      await cache.redis.connect();
      await cache.redis.ping();
    } catch (err) {
      cache.redis.disconnect();
      throw new Error(`cannot connect to Redis at ${redacted(url)}: ${(err as Error).message}`);
    }
    return cache;
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if ((err as Error).name === 'ReplyError') throw err; // a command error, e.g. INCR on text
      throw unavailable(`cache unavailable (${(err as Error).message})`);
    }
  }

  async get(key: string): Promise<string | null> {
    checkKey(key);
    return this.call(() => this.redis.get(key));
  }

  async set(key: string, value: string, ttlMs?: number): Promise<void> {
    checkKey(key);
    checkValue(value);
    const ttl = checkTtl(ttlMs);
    await this.call(() => (ttl === undefined ? this.redis.set(key, value) : this.redis.set(key, value, 'PX', ttl)));
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    checkKey(key);
    checkValue(value);
    const ttl = checkTtl(ttlMs, true)!;
    return (await this.call(() => this.redis.set(key, value, 'PX', ttl, 'NX'))) === 'OK';
  }

  async ttl(key: string): Promise<number> {
    checkKey(key);
    return this.call(() => this.redis.pttl(key));
  }

  async incr(key: string, ttlMs?: number, by = 1): Promise<number> {
    checkKey(key);
    const ttl = checkTtl(ttlMs) ?? 0;
    checkBy(by);
    return Number(await this.call(() => this.redis.incrTtl(key, ttl, by)));
  }

  async del(key: string): Promise<void> {
    checkKey(key);
    await this.call(() => this.redis.del(key));
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
