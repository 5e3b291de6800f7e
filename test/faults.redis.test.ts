// Fault: Redis stopped for 10 s under load. The platform (PostgreSQL, NATS and a private
// redis-server on a free port: the machine's shared Redis is never touched) keeps answering: the
// gateway's rate limit lets requests through while the cache is down (perceive/recall/read go on),
// the faucet refuses cleanly (a 503 problem+json with Retry-After: its cooldown cannot be checked),
// and both work again when Redis returns, nothing acknowledged lost.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startCluster, type Cluster } from './helpers/cluster.ts';
import { expectNothingLost, expectRetryableOnly } from './helpers/faults.ts';
import { privateRedis, runRedisFault } from '../bench/load.ts';

let c: Cluster;
let redis: Awaited<ReturnType<typeof privateRedis>>;

beforeAll(async () => {
  redis = await privateRedis();
  c = await startCluster({ mode: 'embedded', realAdapters: true, redisUrl: redis.url, shift: 27000 });
  await c.waitHealthy(60_000);
}, 75_000);

afterAll(async () => {
  if (process.env.COG_FAULT_LOG) (await import('node:fs')).writeFileSync(process.env.COG_FAULT_LOG, c?.output() ?? '');
  await c?.stop();
  await redis?.cleanup();
}, 30_000);

describe('faults: Redis outage', () => {
  it('keeps the gateway answering, refuses the faucet cleanly, and heals by itself', async () => {
    const r = await runRedisFault(c, redis, { loadMs: 30_000, outageMs: 10_000, concurrency: 4 });
    console.log(
      `${r.name}: acknowledged ${r.acknowledged}, recovered ${r.recovered}, lost ${r.lost}; client errors ${JSON.stringify(r.load.byStatus)}; ${r.notes.join('; ')}; probes ${JSON.stringify(r.probes.map((p) => `${p.route} ${p.status} ${p.ms}ms ra=${p.retryAfter}`))}`,
    );
    expectNothingLost(r);
    expect(r.probes.length).toBeGreaterThan(0);
    for (const p of r.probes) {
      expect(p.ms, JSON.stringify(p)).toBeLessThan(10_000);
      if (p.route.startsWith('GET'))
        expect(p.status, JSON.stringify(p)).toBe(200); // degrades open
      else {
        expect([200, 503], JSON.stringify(p)).toContain(p.status); // the faucet: refused cleanly
        if (p.status === 503) {
          expect(p.contentType).toContain('application/problem+json');
          expect(Number(p.retryAfter)).toBeGreaterThan(0);
        }
      }
    }
    // The load itself went on: at most a few retryable 503s (a command caught as the connection
    // dropped), no hangs, no other errors.
    expectRetryableOnly(r.load);
    expect(r.load.errors, JSON.stringify(r.load.byStatus)).toBeLessThan(Math.max(5, r.load.requests / 50));
    expect(r.faucetAfter).toBeGreaterThan(0);
  }, 80_000);
});
