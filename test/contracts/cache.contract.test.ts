// One contract for the Cache port, run against the in-process adapter and Redis (local server,
// a key prefix of its own, removed afterwards).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { Cache } from '../../lib/cache/port.ts';
import { MemoryCache } from '../../lib/cache/memory.ts';
import { RedisCache } from '../../lib/cache/redis.ts';
import { createCache } from '../../lib/cache/index.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const run = Math.random().toString(36).slice(2, 8);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const adapters: { name: string; setup: () => Promise<{ cache: Cache; teardown(): Promise<void> }> }[] = [
  {
    name: 'memory',
    async setup() {
      const cache = new MemoryCache();
      return { cache, teardown: () => cache.close() };
    },
  },
  {
    name: 'redis',
    async setup() {
      const prefix = `test:${run}:`;
      const cache = await RedisCache.connect(REDIS_URL, { keyPrefix: prefix });
      return {
        cache,
        async teardown() {
          await cache.close();
          const raw = new Redis(REDIS_URL);
          let cursor = '0';
          do {
            const [next, keys] = await raw.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
            if (keys.length) await raw.del(...keys);
            cursor = next;
          } while (cursor !== '0');
          await raw.quit();
        },
      };
    },
  },
];

describe.each(adapters)('Cache contract: $name', ({ setup }) => {
  let cache: Cache;
  let teardown: () => Promise<void>;
  beforeAll(async () => {
    ({ cache, teardown } = await setup());
  });
  afterAll(async () => teardown?.());

  it('gets, sets, overwrites and deletes', async () => {
    expect(await cache.get('k:missing')).toBeNull();
    await cache.set('k:a', 'one');
    expect(await cache.get('k:a')).toBe('one');
    await cache.set('k:a', 'two');
    expect(await cache.get('k:a')).toBe('two');
    await cache.set('k:empty', '');
    expect(await cache.get('k:empty')).toBe('');
    await cache.del('k:a');
    await cache.del('k:a'); // deleting a missing key is fine
    expect(await cache.get('k:a')).toBeNull();
  });

  // The TTLs below are long enough that a loaded machine does not outlast them between two calls
  // meant to land inside them, and each sleep outlasts its TTL.
  it('expires values after their TTL and reports remaining time', async () => {
    await cache.set('t:short', 'v', 1000);
    const left = await cache.ttl('t:short');
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(1000);
    expect(await cache.get('t:short')).toBe('v');
    await sleep(1100);
    expect(await cache.get('t:short')).toBeNull();
    expect(await cache.ttl('t:short')).toBe(-2);

    await cache.set('t:forever', 'v');
    expect(await cache.ttl('t:forever')).toBe(-1);
    expect(await cache.ttl('t:never-set')).toBe(-2);

    // A set without TTL clears an earlier TTL, as SET does.
    await cache.set('t:cleared', 'v', 10_000);
    await cache.set('t:cleared', 'w');
    expect(await cache.ttl('t:cleared')).toBe(-1);
  });

  it('setIfAbsent lets exactly one of 20 concurrent callers win', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => cache.setIfAbsent('nx:race', `caller-${i}`, 5_000)));
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results.indexOf(true);
    expect(await cache.get('nx:race')).toBe(`caller-${winner}`);
    const ttl = await cache.ttl('nx:race');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5_000);
    expect(await cache.setIfAbsent('nx:race', 'late', 5_000)).toBe(false);
  });

  it('setIfAbsent succeeds again once the key has expired', async () => {
    expect(await cache.setIfAbsent('nx:lease', 'a', 1000)).toBe(true);
    expect(await cache.setIfAbsent('nx:lease', 'b', 1000)).toBe(false);
    await sleep(1100);
    expect(await cache.setIfAbsent('nx:lease', 'c', 1000)).toBe(true);
    expect(await cache.get('nx:lease')).toBe('c');
  });

  it('incr counts atomically and sets the TTL only when it creates the key', async () => {
    expect(await cache.incr('n:plain')).toBe(1);
    expect(await cache.incr('n:plain')).toBe(2);
    expect(await cache.ttl('n:plain')).toBe(-1);

    expect(await cache.incr('n:window', 2000)).toBe(1);
    await sleep(600);
    expect(await cache.incr('n:window', 2000)).toBe(2); // does not push the expiry out
    const left = await cache.ttl('n:window');
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(1410);
    await sleep(1500);
    expect(await cache.get('n:window')).toBeNull();
    expect(await cache.incr('n:window', 2000)).toBe(1);

    const all = await Promise.all(Array.from({ length: 20 }, () => cache.incr('n:race', 5_000)));
    expect([...all].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await cache.get('n:race')).toBe('20');

    await cache.set('n:text', 'abc');
    await expect(cache.incr('n:text')).rejects.toThrow(/not an integer/);

    // By more than one (a batch of counts at once), and never by nothing or a fraction.
    expect(await cache.incr('n:by', 5_000, 7)).toBe(7);
    expect(await cache.incr('n:by', 5_000, 3)).toBe(10);
    expect(await cache.incr('n:by', 5_000)).toBe(11);
    expect(await cache.ttl('n:by')).toBeGreaterThan(0);
    for (const by of [0, -2, 1.5]) await expect(cache.incr('n:by', 5_000, by)).rejects.toThrow(/by must be a positive integer/);
    expect(await cache.get('n:by')).toBe('11');
  });

  it('refuses bad TTLs', async () => {
    await expect(cache.set('bad:ttl', 'v', 0)).rejects.toThrow(/ttlMs/);
    await expect(cache.set('bad:ttl', 'v', -5)).rejects.toThrow(/ttlMs/);
    await expect(cache.setIfAbsent('bad:ttl', 'v', Number.NaN)).rejects.toThrow(/ttlMs/);
    await expect(cache.incr('bad:ttl', -1)).rejects.toThrow(/ttlMs/);
  });
});

describe('createCache', () => {
  it('is in-process without a URL and fails clearly on a bad Redis URL', async () => {
    const mem = await createCache({});
    expect(mem).toBeInstanceOf(MemoryCache);
    await mem.close();
    await expect(createCache({ redisUrl: 'redis://:hunter2@127.0.0.1:1' })).rejects.toThrow(/cannot connect to Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1/);
  });
});
