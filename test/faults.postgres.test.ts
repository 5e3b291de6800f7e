// Fault: PostgreSQL stopped for 10 s under load. The platform runs on a private PostgreSQL cluster
// (initdb into a temp dir, a free port: the machine's shared server is never touched); during the
// gap writes are a quick 503 problem+json with Retry-After (no hang, no 500), nothing is
// half-applied, and afterwards writes flow again without restarting the platform, every
// acknowledged write intact.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startCluster, call, type Cluster } from './helpers/cluster.ts';
import { expectNothingLost, expectRetryableOnly } from './helpers/faults.ts';
import { privatePostgres, runPostgresFault } from '../bench/load.ts';

let c: Cluster;
let pgs: Awaited<ReturnType<typeof privatePostgres>>;

beforeAll(async () => {
  pgs = await privatePostgres();
  c = await startCluster({ mode: 'embedded', realAdapters: true, databaseUrl: pgs.url, shift: 26000 });
  await c.waitHealthy(60_000);
}, 75_000);

afterAll(async () => {
  if (process.env.COG_FAULT_LOG) (await import('node:fs')).writeFileSync(process.env.COG_FAULT_LOG, c?.output() ?? '');
  await c?.stop();
  await pgs?.cleanup();
}, 30_000);

describe('faults: PostgreSQL outage', () => {
  it('refuses writes cleanly during the gap, loses nothing acknowledged, and heals by itself', async () => {
    const pid = c.pidOf('platform');
    const r = await runPostgresFault(c, pgs, { loadMs: 30_000, outageMs: 10_000, concurrency: 4 });
    console.log(
      `${r.name}: acknowledged ${r.acknowledged}, recovered ${r.recovered}, lost ${r.lost}; client errors ${JSON.stringify(r.load.byStatus)}; ${r.notes.join('; ')}; probes ${JSON.stringify(r.probes.map((p) => `${p.route} ${p.status} ${p.ms}ms ra=${p.retryAfter}`))}`,
    );
    expectNothingLost(r);
    expect(r.halfApplied).toBe(0);
    // During the gap: 503 problem+json with Retry-After, quickly.
    expect(r.probes.length).toBeGreaterThan(0);
    for (const p of r.probes) {
      expect(p.status, JSON.stringify(p)).toBe(503);
      expect(p.contentType).toContain('application/problem+json');
      expect(Number(p.retryAfter)).toBeGreaterThan(0);
      expect(p.code).toBe('UNAVAILABLE');
      expect(p.ms).toBeLessThan(10_000);
    }
    expectRetryableOnly(r.load);
    expect(r.load.byStatus['500']).toBeUndefined();
    // The same platform process served throughout, and writes flow again.
    expect(c.output()).not.toMatch(/exited with/);
    void pid;
    const e0 = (await call('GET', `${c.gateway}/v1/epochs/current`)).body.epoch as number;
    await expect.poll(async () => (await call('GET', `${c.gateway}/v1/epochs/current`)).body.epoch, { timeout: 20_000, interval: 500 }).toBeGreaterThan(e0);
  }, 80_000);
});
