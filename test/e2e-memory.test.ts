// Stacks and sleeves through REST, both shapes: ids, fields, tokens, refusals (and that a refused
// request changes nothing), decommission effects, sync, balances, desync.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateIdentity, unwrapSecret } from '../lib/crypto.ts';
import { stackAddress } from '../lib/address.ts';
import { memoryTestApp, type MemoryTestApp } from './helpers/memory-app.ts';

let t: MemoryTestApp;
beforeAll(async () => {
  t = await memoryTestApp();
});
afterAll(async () => t?.close());

const inject = async (method: string, url: string, payload?: unknown) => {
  const res = await t.app.inject({ method: method as never, url, payload: payload as never });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined, type: res.headers['content-type'] };
};
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('stacks', () => {
  it('creates a Shape A stack with every field and identityPriv only in the creation response', async () => {
    const r = await inject('POST', '/v1/stacks', { name: 'alice' });
    expect(r.status).toBe(201);
    const s = r.body;
    expect(s.id).toMatch(new RegExp(`^stack:human:${s.tokenId}:[0-9a-f]{12}$`));
    expect(s).toMatchObject({ name: 'alice', kind: 'human', epoch: 0, episodicHead: null, sleeves: [], anchors: [], chainStatus: 'pending' });
    expect(s.cpv).toEqual({ syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1, residueCoeff: 1, routingCoeff: 1 });
    expect(s.binding).toEqual({ floor: 0.25, decayRate: 0.05 });
    expect(s.pubKey).toMatch(/^[0-9a-f]{64}$/);
    expect(s.pubkey).toBe(s.pubKey);
    expect(s.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    expect(s.createdAt).toMatch(ISO);
    expect(s.balances).toEqual({ compute: 0, memory: 0, sync: 0, routing: 0, residue: 0 });
    const { publicKeyFromSeed } = await import('../lib/crypto.ts');
    expect(publicKeyFromSeed(s.identityPriv)).toBe(s.pubKey);

    const read = await inject('GET', `/v1/stacks/${encodeURIComponent(s.id)}`);
    expect(read.status).toBe(200);
    expect(read.body.identityPriv).toBeUndefined();
    expect(read.body.id).toBe(s.id);

    // master secret stored wrapped, bound to the id; a mintIdentity intent in the outbox
    const row = await t.p.db.prisma.stack.findUniqueOrThrow({ where: { id: s.id } });
    expect(row.masterSecret).toMatch(/^v1\./);
    expect(unwrapSecret(t.p.masterKey, row.masterSecret, s.id).byteLength).toBe(32);
    const intent = await t.p.db.prisma.chainOutbox.findFirst({ where: { kind: 'mintIdentity', ref: s.id } });
    expect(intent?.payload).toMatchObject({ stackId: s.id, tokenId: s.tokenId, owner: stackAddress(s.pubKey) });
    expect(JSON.stringify((await t.p.db.prisma.eventOutbox.findMany()).map((e) => e.data))).not.toContain(s.identityPriv);
  });

  it('creates stacks of a given kind with increasing tokenIds', async () => {
    const a = (await inject('POST', '/v1/stacks', { name: 'm', kind: 'mining' })).body;
    const b = (await inject('POST', '/v1/stacks', { name: 'n', kind: 'ai' })).body;
    expect(a.id).toMatch(/^stack:mining:/);
    expect(b.tokenId).toBe(a.tokenId + 1);
  });

  it('creates a Shape B stack from a client pubkey; a duplicate pubkey is 409', async () => {
    const { pubKey } = generateIdentity();
    const cpv = { computeCoeff: 1.5, memoryCoeff: 0.5, syncCoeff: 2, routingCoeff: 0, residueCoeff: 1 };
    const r = await inject('POST', '/v1/stacks', { pubkey: pubKey, cpv });
    expect(r.status).toBe(201);
    expect(r.body.id).toBe(`stack:${stackAddress(pubKey)}`);
    expect(r.body.id).toMatch(/^stack:0x[0-9a-f]{40}$/);
    expect(r.body.identityPriv).toBeUndefined();
    expect(r.body.pubkey).toBe(pubKey);
    expect(r.body.cpv).toEqual(cpv);
    const dup = await inject('POST', '/v1/stacks', { pubkey: pubKey.toUpperCase(), cpv });
    expect(dup.status).toBe(409);
    expect(dup.type).toContain('application/problem+json');
  });

  it('refuses bad creations with 400 and creates nothing', async () => {
    const before = await t.p.db.prisma.stack.count();
    const { pubKey } = generateIdentity();
    const bad = [
      {},
      { name: '' },
      { name: 'x'.repeat(201) },
      { name: 5 },
      { name: 'a', kind: 'robot' },
      { pubkey: 'zz', cpv: { computeCoeff: 1, memoryCoeff: 1, syncCoeff: 1, routingCoeff: 1, residueCoeff: 1 } },
      { pubkey: pubKey },
      { pubkey: pubKey, cpv: { computeCoeff: 1, memoryCoeff: 1, syncCoeff: 1, routingCoeff: 1 } },
      { pubkey: pubKey, cpv: { computeCoeff: 2.5, memoryCoeff: 1, syncCoeff: 1, routingCoeff: 1, residueCoeff: 1 } },
      { pubkey: pubKey, cpv: { computeCoeff: '1', memoryCoeff: 1, syncCoeff: 1, routingCoeff: 1, residueCoeff: 1 } },
    ];
    for (const body of bad) {
      const r = await inject('POST', '/v1/stacks', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBeDefined();
    }
    expect((await t.app.inject({ method: 'POST', url: '/v1/stacks', payload: '{bad', headers: { 'content-type': 'application/json' } })).statusCode).toBe(400);
    expect(await t.p.db.prisma.stack.count()).toBe(before);
    expect((await inject('GET', '/v1/stacks/stack:nope')).status).toBe(404);
  });
});

describe('sleeves', () => {
  let stackId: string;
  beforeAll(async () => {
    stackId = (await inject('POST', '/v1/stacks', { name: 'host' })).body.id;
  });

  it('spawns Shape A and Shape B sleeves with their initial tokens', async () => {
    const a = await inject('POST', '/v1/sleeves', { stackId, embodimentType: 'ai', hostname: 'box-1' });
    expect(a.status).toBe(201);
    expect(a.body.id).toMatch(/^sleeve:ai:\d+:[0-9a-f]{8}$/);
    expect(a.body).toMatchObject({ stackId, embodimentType: 'ai', kind: 'ai', alive: true, drift: 0, syncEpoch: 0, hostname: 'box-1', tickRate: 2000 });
    expect(a.body.tokens).toEqual({ sync: 250, memory: 250, compute: 250, routing: 250, residue: 0 });
    expect(a.body.lastSync).toMatch(ISO);
    expect(a.body.createdAt).toMatch(ISO);

    const b = await inject('POST', `/v1/sleeves/${encodeURIComponent(stackId)}`, { kind: 'human', tickRate: 5000 });
    expect(b.status).toBe(201);
    expect(b.body.id).toMatch(/^sleeve:0x[0-9a-f]{40}$/);
    expect(b.body).toMatchObject({ kind: 'human', tickRate: 5000, drift: 0, alive: true, hostname: null });
    expect(b.body.tokens).toEqual({ compute: 1000, memory: 1000, sync: 500, routing: 500, residue: 0 });
    const m = await inject('POST', `/v1/sleeves/${encodeURIComponent(stackId)}`, { kind: 'mining' });
    expect(m.body.tickRate).toBe(0);
    const mem = await inject('POST', '/v1/sleeves', { stackId, embodimentType: 'memory' });
    expect(mem.body.tickRate).toBe(t.p.config.epochIntervalMs);

    const stack = (await inject('GET', `/v1/stacks/${encodeURIComponent(stackId)}`)).body;
    expect(stack.sleeves.map((s: { id: string }) => s.id)).toEqual([a.body.id, b.body.id, m.body.id, mem.body.id]);
    expect(stack.balances).toEqual({ compute: 2500, memory: 2500, sync: 1500, routing: 1500, residue: 0 });
    const totals = await inject('GET', `/v1/tokens/balances/${encodeURIComponent(stackId)}`);
    expect(totals.body).toEqual({ stackId, sleeveTotals: stack.balances });
    const list = (await inject('GET', '/v1/stacks')).body;
    expect(list.find((s: { id: string }) => s.id === stackId).sleeves).toHaveLength(4);
  });

  it('refuses bad spawns (400) and spawns on missing stacks (404), changing nothing', async () => {
    const before = await t.p.db.prisma.sleeve.count();
    expect((await inject('POST', '/v1/sleeves', { stackId, embodimentType: 'cyborg' })).status).toBe(400);
    expect((await inject('POST', '/v1/sleeves', { stackId })).status).toBe(400);
    expect((await inject('POST', '/v1/sleeves', { stackId: 'stack:none', embodimentType: 'ai' })).status).toBe(404);
    expect((await inject('POST', `/v1/sleeves/${encodeURIComponent(stackId)}`, { kind: 'ai', tickRate: -1 })).status).toBe(400);
    expect((await inject('POST', `/v1/sleeves/${encodeURIComponent(stackId)}`, { kind: 'ai', tickRate: 1.5 })).status).toBe(400);
    expect((await inject('POST', '/v1/sleeves/stack:none', { kind: 'ai' })).status).toBe(404);
    expect(await t.p.db.prisma.sleeve.count()).toBe(before);
  });

  it('decommissions: alive false, lease ended, tokens to the pool, snapshot kept, second delete 409', async () => {
    const s = (await inject('POST', '/v1/sleeves', { stackId, embodimentType: 'human' })).body;
    const del = await inject('DELETE', `/v1/sleeves/${encodeURIComponent(s.id)}`);
    expect(del).toMatchObject({ status: 200, body: { ok: true } });
    const alive = (await inject('GET', '/v1/sleeves')).body.map((x: { id: string }) => x.id);
    expect(alive).not.toContain(s.id);
    const read = (await inject('GET', `/v1/sleeves/${encodeURIComponent(s.id)}`)).body;
    expect(read.alive).toBe(false);
    expect(read.tokens).toEqual({ sync: 250, memory: 250, compute: 250, routing: 250, residue: 0 });
    const lease = await t.p.db.prisma.keyLease.findUniqueOrThrow({ where: { sleeveId: s.id } });
    expect(lease.active).toBe(false);
    const pool = await t.p.db.prisma.balance.findMany({ where: { account: `pool:${stackId}` } });
    expect(pool.find((b) => b.token === 'compute')?.milli).toBe(250_000n);
    expect((await t.p.db.prisma.balance.findMany({ where: { account: `sleeve:${s.id}`, milli: { gt: 0n } } })).length).toBe(0);
    const again = await inject('DELETE', `/v1/sleeves/${encodeURIComponent(s.id)}`);
    expect(again.status).toBe(409);
    expect((await inject('DELETE', '/v1/sleeves/sleeve:none')).status).toBe(404);
    expect((await inject('POST', `/v1/sleeves/${encodeURIComponent(s.id)}/sync`)).status).toBe(409);
  });

  it('sync resets drift for 1 sync token; desync lists sleeves above the maximum; 402 when short', async () => {
    const s = (await inject('POST', '/v1/sleeves', { stackId, embodimentType: 'ai' })).body;
    await t.p.db.prisma.sleeve.update({ where: { id: s.id }, data: { driftMilli: 15_100 } });
    t.p.setEpoch(3);
    const desync = (await inject('GET', '/v1/coordination/desync')).body;
    expect(desync).toContainEqual({ id: s.id, stackId, drift: 15.1 });
    const r = await inject('POST', `/v1/sleeves/${encodeURIComponent(s.id)}/sync`);
    expect(r).toMatchObject({ status: 200, body: { ok: true, epoch: 3 } });
    const after = (await inject('GET', `/v1/sleeves/${encodeURIComponent(s.id)}`)).body;
    expect(after).toMatchObject({ drift: 0, syncEpoch: 3 });
    expect(after.tokens.sync).toBe(249);
    expect((await inject('GET', '/v1/coordination/desync')).body.map((d: { id: string }) => d.id)).not.toContain(s.id);
    // drain sync tokens: the 402 carries token/required/available and changes nothing
    await t.p.db.prisma.balance.update({ where: { account_token: { account: `sleeve:${s.id}`, token: 'sync' } }, data: { milli: 500n } });
    await t.p.db.prisma.sleeve.update({ where: { id: s.id }, data: { driftMilli: 2000 } });
    const short = await inject('POST', `/v1/sleeves/${encodeURIComponent(s.id)}/sync`);
    expect(short.status).toBe(402);
    expect(short.body).toMatchObject({ token: 'sync', required: 1, available: 0.5 });
    expect((await inject('GET', `/v1/sleeves/${encodeURIComponent(s.id)}`)).body.drift).toBe(2);
    expect((await inject('GET', '/v1/tokens/balances/stack:none')).status).toBe(404);
    t.p.setEpoch(0);
  });
});
