// Per-client rate limit on the gateway (COG_RATE_LIMIT_PER_MIN): 429 problem with Retry-After once
// over the limit, a refused request changes nothing, and the count is shared by two gateway
// processes' worth of instances on one Redis (RedisCache, unique key prefix).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisCache } from '../lib/cache/redis.ts';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { call, isProblem, secureGateway, snapshot, type SecureGateway } from './helpers/secure-gateway.ts';

const LIMIT = 5;
/** A flood guard's size: counted locally and shared in batches (router/auth.ts, CacheStore). */
const FLOOD_LIMIT = 1000;
const gws: SecureGateway[] = [];
const floodGws: SecureGateway[] = [];

async function onRedis(limit: number, prefix: string): Promise<TestPlatform> {
  const p = await testPlatform({ GATEWAY_PORT: '0', HIPPOCAMPUS_PORT: '0', COG_RATE_LIMIT_PER_MIN: String(limit) });
  await p.cache.close();
  p.cache = await RedisCache.connect('redis://127.0.0.1:6379', { keyPrefix: prefix });
  return p;
}

/** Two gateways counting on one Redis (a key prefix of their own). */
async function twoGateways(limit: number, into: SecureGateway[]): Promise<void> {
  const prefix = `cog-test-rl-${randomBytes(6).toString('hex')}:`;
  for (let i = 0; i < 2; i++) {
    const p = await onRedis(limit, prefix);
    const g = await secureGateway({}, { platform: p });
    into.push({
      ...g,
      close: async () => {
        await g.close();
        await p.cleanup();
      },
    });
  }
}

/** Fixed one-minute windows: start well inside one. */
async function freshWindow(needMs: number): Promise<void> {
  const into = Date.now() % 60_000;
  if (into > 60_000 - needMs) await new Promise((r) => setTimeout(r, 60_000 - into + 50));
}

beforeAll(async () => {
  await twoGateways(LIMIT, gws);
  await twoGateways(FLOOD_LIMIT, floodGws);
});
afterAll(async () => {
  for (const g of [...gws, ...floodGws]) await g.close();
});

describe('gateway rate limit', () => {
  it('is shared across two gateways on one Redis: 429 with Retry-After after the limit', async () => {
    await freshWindow(10_000);
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

  // A longer timeout: freshWindow may wait up to 25 s before the 1,300-odd requests, and together
  // they passed the default 30 s on a busy CI machine (session 25).
  it('counts a flood guard in batches that both gateways hear, and lets exactly the limit through', async () => {
    await freshWindow(25_000);
    const [a, b] = floodGws;
    const remaining = (r: Awaited<ReturnType<typeof call>>) => Number(r.headers.get('x-ratelimit-remaining'));
    // Far from the limit each gateway counts locally: its own answers are exact.
    let last = FLOOD_LIMIT;
    for (let i = 0; i < 300; i++) {
      const r = await call(a.url, 'GET', '/v1/sleeves');
      expect(r.status).toBe(200);
      last = remaining(r);
    }
    expect(last).toBe(FLOOD_LIMIT - 300);
    // The batches reach Redis, and the other gateway hears the total when its own batch goes.
    await new Promise((r) => setTimeout(r, 200));
    await call(b.url, 'GET', '/v1/sleeves'); // its first of the window: through Redis
    await call(b.url, 'GET', '/v1/sleeves'); // counted locally, in its next batch
    await new Promise((r) => setTimeout(r, 200));
    const fromB = await call(b.url, 'GET', '/v1/sleeves');
    expect(remaining(fromB)).toBe(FLOOD_LIMIT - 303);
    // Up to the limit, alternating: within its last tenth every request counts through Redis, so
    // together they let exactly the limit through, then both refuse.
    let passed = 303;
    for (let i = 0; passed < FLOOD_LIMIT + 5 && i < 2 * FLOOD_LIMIT; i++) {
      const r = await call((i % 2 ? b : a).url, 'GET', '/v1/sleeves');
      if (r.status === 429) break;
      expect(r.status).toBe(200);
      passed++;
    }
    expect(passed).toBe(FLOOD_LIMIT);
    for (const g of [a, b]) expect((await call(g.url, 'GET', '/v1/sleeves')).status).toBe(429);
  }, 90_000);
});
