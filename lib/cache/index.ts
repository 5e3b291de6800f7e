// Chooses the cache adapter: Redis when a URL is configured, in-process otherwise.
import type { Cache } from './port.ts';
import { MemoryCache } from './memory.ts';
import { RedisCache } from './redis.ts';

export type { Cache } from './port.ts';
export { MemoryCache, type MemoryCacheOptions } from './memory.ts';
export { RedisCache, type RedisCacheOptions } from './redis.ts';

export async function createCache(opts: { redisUrl?: string; keyPrefix?: string } = {}): Promise<Cache> {
  if (opts.redisUrl) return RedisCache.connect(opts.redisUrl, { keyPrefix: opts.keyPrefix });
  return new MemoryCache();
}
