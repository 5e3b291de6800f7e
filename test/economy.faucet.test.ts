// Faucet: 100 of each core token spread over the alive sleeves, one drip per cooldown per stack,
// held in the cache so two faucet processes (two Redis connections, two servers) share it.
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createCache, type Cache } from '../lib/cache/index.ts';
import type { Platform } from '../lib/platform.ts';
import type { RunningService } from '../lib/service.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { startFaucet } from '../subgraphs/economy/faucet/service.ts';
import { drip, splitMilli } from '../subgraphs/economy/faucet.ts';
import { balanceOf, poolAccount, sleeveAccount } from '../subgraphs/economy/ledger.ts';

const redisUp = () =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(6379, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
    s.setTimeout(500, () => (s.destroy(), resolve(false)));
  });

let p: TestPlatform;
const caches: Cache[] = [];
const faucets: RunningService[] = [];
beforeAll(async () => {
  p = await testPlatform({ FAUCET_PORT: '0' });
  const prefix = `cog-test-${randomBytes(4).toString('hex')}:`;
  const redis = (await redisUp()) ? 'redis://127.0.0.1:6379' : undefined;
  // Two "processes": each its own cache connection and server, one database.
  for (let i = 0; i < 2; i++) {
    const cache = await createCache({ redisUrl: redis, keyPrefix: prefix });
    caches.push(cache);
    faucets.push(await startFaucet({ ...p, cache } as Platform));
  }
  if (!redis) caches[1] = caches[0]!; // embedded: one process, one memory cache
});
afterAll(async () => {
  for (const f of faucets) await f.close();
  for (const c of new Set(caches)) await c.close();
  await p.cleanup();
});

const post = (url: string, body: unknown) =>
  fetch(`${url}/v1/faucet/drip`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('faucet', () => {
  it('splits integer milli evenly, remainder to the first', () => {
    expect(splitMilli(100_000n, 3)).toEqual([33_334n, 33_333n, 33_333n]);
    expect(splitMilli(100_000n, 1)).toEqual([100_000n]);
  });

  it('grants 100 of each core token over the alive sleeves, one drip per stack across two faucets', async () => {
    const stack = await createStack(p, { name: 'drip' });
    const sleeves = [];
    for (let i = 0; i < 3; i++) sleeves.push(await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' }));
    const res = await Promise.all([post(faucets[0]!.url!, { stackId: stack.id }), post(faucets[1]!.url!, { stackId: stack.id })]);
    const statuses = res.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 429]);
    const ok = res.find((r) => r.status === 200)!;
    const limited = res.find((r) => r.status === 429)!;
    const grant = await ok.json();
    expect(grant).toEqual({ ok: true, granted: { compute: 100, memory: 100, sync: 100, routing: 100 }, sleeves: sleeves.map((s) => s.id).sort() });
    expect(limited.headers.get('content-type')).toMatch(/problem\+json/);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(55);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const balances = await Promise.all(sleeves.map((s) => balanceOf(p.db.prisma, sleeveAccount(s.id))));
    const total = balances.reduce((a, b) => Math.round((a + b.compute - 250) * 1000) / 1000, 0);
    expect(total).toBe(100); // exactly one drip, on top of the 250 spawn grant each
    expect(balances.map((b) => b.routing).sort()).toEqual([283.333, 283.333, 283.334]);
    // A third attempt on either faucet is still inside the cooldown.
    expect((await post(faucets[0]!.url!, { stackId: stack.id })).status).toBe(429);
  });

  it('drips into the pool when no sleeve is alive; unknown stack is a 404 and sets no cooldown', async () => {
    const stack = await createStack(p, { name: 'empty' });
    const grant = await drip({ ...p, cache: caches[0]! } as Platform, stack.id);
    expect(grant.sleeves).toEqual([]);
    expect(await balanceOf(p.db.prisma, poolAccount(stack.id))).toMatchObject({ compute: 100, memory: 100, sync: 100, routing: 100, residue: 0 });
    const nf = await post(faucets[1]!.url!, { stackId: 'stack:human:999:000000000000' });
    expect(nf.status).toBe(404);
    expect(await caches[0]!.get('faucet:stack:human:999:000000000000')).toBeNull();
    const bad = await post(faucets[1]!.url!, { stack: 'x' });
    expect(bad.status).toBe(400);
  });

  it('grants again after the cooldown', async () => {
    // Long enough that a loaded machine cannot outlast it between two drips, short enough to wait out.
    const q = { ...p, cache: caches[0]!, config: { ...p.config, faucetCooldownMs: 3000 } } as Platform;
    const stack = await createStack(p, { name: 'again' });
    await drip(q, stack.id);
    await expect(drip(q, stack.id)).rejects.toMatchObject({ status: 429 });
    await new Promise((r) => setTimeout(r, 3100));
    await drip(q, stack.id);
    expect((await balanceOf(p.db.prisma, poolAccount(stack.id))).compute).toBe(200);
  });
});
