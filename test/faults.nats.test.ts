// Fault: NATS stopped for 10 s under load. The platform (PostgreSQL, Redis and a private
// nats-server on a free port: the machine's shared NATS is never touched) keeps every
// acknowledged write, refuses or buffers (event outbox) the rest, never half-applies, and every
// event of an acknowledged write is on the stream after the gap.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startCluster, call, type Cluster } from './helpers/cluster.ts';
import { expectNothingLost, expectRetryableOnly } from './helpers/faults.ts';
import { privateNats, runNatsFault } from '../bench/load.ts';

let c: Cluster;
let nats: Awaited<ReturnType<typeof privateNats>>;

beforeAll(async () => {
  nats = await privateNats();
  c = await startCluster({ mode: 'embedded', realAdapters: true, natsUrl: nats.url, shift: 25000 });
  await c.waitHealthy(150_000);
}, 170_000);

afterAll(async () => {
  await c?.stop();
  await nats?.cleanup();
}, 30_000);

describe('faults: NATS outage', () => {
  it("buffers or refuses cleanly, loses nothing, and delivers the gap's events after it", async () => {
    const r = await runNatsFault(c, nats, { loadMs: 35_000, outageMs: 10_000, concurrency: 4 });
    console.log(
      `${r.name}: acknowledged ${r.acknowledged}, recovered ${r.recovered}, lost ${r.lost}; client errors ${JSON.stringify(r.load.byStatus)}; ${r.notes.join('; ')}`,
    );
    expectNothingLost(r);
    expect(r.eventsMissing).toBe(0);
    expect(r.outboxLeft).toBe(0);
    expectRetryableOnly(r.load);
    // Healthy again by itself: epochs advance (Medulla's events flow) and writes succeed.
    const e0 = (await call('GET', `${c.gateway}/v1/epochs/current`)).body.epoch as number;
    await expect.poll(async () => (await call('GET', `${c.gateway}/v1/epochs/current`)).body.epoch, { timeout: 30_000, interval: 500 }).toBeGreaterThan(e0);
  }, 120_000);
});
