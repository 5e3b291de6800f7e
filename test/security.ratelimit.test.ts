// Per-client rate limit on the gateway (COG_RATE_LIMIT_PER_MIN): 429 problem with Retry-After once
// over the limit, a refused request changes nothing, and the count is shared by two gateway
// processes' worth of instances on one Redis (RedisCache, unique key prefix).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisCache } from '../lib/cache/redis.ts';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { call, isProblem, secureGateway, snapshot, type SecureGateway } from './helpers/secure-gateway.ts';

const LIMIT = 5;
const prefix = `cog-test-rl-${randomBytes(6).toString('hex')}:`;
const gws: SecureGateway[] = [];

async function onRedis(): Promise<TestPlatform> {
  const p = await testPlatform({ GATEWAY_PORT: '0', HIPPOCAMPUS_PORT: '0', COG_RATE_LIMIT_PER_MIN: String(LIMIT) });
  await p.cache.close();
  p.cache = await RedisCache.connect('redis://127.0.0.1:6379', { keyPrefix: prefix });
  return p;
}

beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    const p = await onRedis();
    const g = await secureGateway({}, { platform: p });
    gws.push({
      ...g,
      close: async () => {
        await g.close();
        await p.cleanup();
      },
    });
  }
});
afterAll(async () => {
  for (const g of gws) await g.close();
});

describe('gateway rate limit', () => {
  it('is shared across two gateways on one Redis: 429 with Retry-After after the limit', async () => {
    // fixed one-minute windows: start well inside one
    const into = Date.now() % 60_000;
    if (into > 50_000) await new Promise((r) => setTimeout(r, 60_000 - into + 50));
    const [a, b] = gws;
    for (let i = 0; i < LIMIT; i++) {
      const r = await call((i % 2 ? b : a).url, 'GET', '/v1/sleeves');
      expect(r.status, `request ${i + 1}`).toBe(200);
      // Every answer says where the client stands, counted across both gateways.
      expect(r.headers.get('x-ratelimit-limit')).toBe(String(LIMIT));
      expect(r.headers.get('x-ratelimit-remaining')).toBe(String(LIMIT - i - 1));
      const reset = Number(r.headers.get('x-ratelimit-reset'));
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
    for (const g of [a, b]) {
      const r = await call(g.url, 'GET', '/v1/sleeves');
      expect(r.status).toBe(429);
      expect(isProblem(r)).toBe(true);
      expect(r.body.code).toBe('RATE_LIMITED');
      const retry = Number(r.headers.get('retry-after'));
      expect(retry).toBeGreaterThanOrEqual(1);
      expect(retry).toBeLessThanOrEqual(60);
    }
    // a refused write changes nothing
    const before = await snapshot(a.p);
    const refused = await call(a.url, 'POST', '/v1/stacks', { name: 'over the limit' });
    expect(refused.status).toBe(429);
    expect(await snapshot(a.p)).toBe(before);
    // health stays reachable for probes
    expect((await call(a.url, 'GET', '/healthz')).status).toBe(200);
    expect((await call(b.url, 'GET', '/healthz')).status).toBe(200);
  });
});
