// Chooses the cache adapter: Redis when a URL is configured, in-process otherwise. The Redis
// adapter (ioredis) is loaded only when chosen: an embedded start does not pay for it.
import type { Cache } from './port.ts';
import { MemoryCache } from './memory.ts';

export type { Cache } from './port.ts';
export { MemoryCache, type MemoryCacheOptions } from './memory.ts';
export type { RedisCacheOptions } from './redis.ts';

export async function createCache(opts: { redisUrl?: string; keyPrefix?: string } = {}): Promise<Cache> {
  if (opts.redisUrl) return (await import('./redis.ts')).RedisCache.connect(opts.redisUrl, { keyPrefix: opts.keyPrefix });
  return new MemoryCache();
}
