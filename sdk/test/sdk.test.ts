// The SDK against a started platform with COG_AUTH=required: signed writes, problems with their
// codes, bad input refused before it leaves, 429 retried as Retry-After says, needlecast progress
// live, and a dropped subscription socket and event-stream socket each resumed without a lost or
// repeated event. One platform for the file (shift 32000).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { startCluster, type Cluster } from '../../test/helpers/cluster.ts';
import { createClient, CogInputError, CogProblem, type CogClient, type StackKey, type WebSocketLike } from '../src/node.ts';

let cluster: Cluster;
let anon: CogClient;
let cog: CogClient;
let key: StackKey;
let ai: string;
let human: string;
const sockets: WebSocketLike[] = [];
const retries: string[] = [];

const until = async <T>(f: () => Promise<T | undefined>, ms = 20_000): Promise<T> => {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
};

beforeAll(async () => {
  cluster = await startCluster({ mode: 'embedded', shift: 32000, env: { COG_AUTH: 'required', COG_FAUCET_COOLDOWN_MS: '1500' } });
  await cluster.waitHealthy(120_000);
  anon = createClient({
    url: cluster.gateway,
    onSocket: (s) => sockets.push(s),
    onRetry: ({ problem, delayMs }) => retries.push(`${problem.code}:${delayMs}`),
  });
  const created = await anon.stacks.create({ name: 'sdk-test', kind: 'ai' });
  key = created.key!;
  cog = anon.withKey(key);
  ai = (await cog.sleeves.spawn({ stackId: key.stackId, kind: 'ai' })).id;
  human = (await cog.sleeves.spawn({ stackId: key.stackId, kind: 'human', hostname: 'desk' })).id;
}, 180_000);

afterAll(async () => {
  await anon?.close();
  await cog?.close();
  await cluster?.stop();
});

describe('@cog/sdk', () => {
  it('creates a stack whose key signs; an unsigned write is a typed 401 problem', async () => {
    expect(key.stackId).toMatch(/^stack:ai:\d+:[0-9a-f]{12}$/);
    expect(key.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    const e = await anon.sleeves.spawn({ stackId: key.stackId, kind: 'ai' }).catch((x) => x);
    expect(e).toBeInstanceOf(CogProblem);
    expect([e.code, e.status]).toEqual(['UNAUTHORIZED', 401]);
    const stack = await cog.stacks.get(key.stackId);
    expect(stack.sleeves.map((s) => s.id).sort()).toEqual([ai, human].sort());
    expect(stack.sleeves.find((s) => s.id === human)?.hostname).toBe('desk');
    expect((await cog.stacks.list()).some((s) => s.id === key.stackId)).toBe(true);
    expect((await cog.sleeves.list()).map((s) => s.id)).toEqual(expect.arrayContaining([ai, human]));
  });

  it('refuses bad input before anything is sent, naming the field', async () => {
    let sent = 0;
    const counting = createClient({ url: cluster.gateway, key, fetch: (...a) => (sent++, fetch(...a)) });
    const cases: Array<[() => Promise<unknown>, string]> = [
      [() => counting.stacks.create({ name: '' }), 'name'],
      [() => counting.stacks.create({ name: 'x', cpv: { syncCoeff: 3 } }), 'cpv.syncCoeff'],
      [() => counting.stacks.create({ pubkey: 'ab', cpv: {} }), 'pubkey'],
      [() => counting.sleeves.spawn({ stackId: key.stackId, kind: 'robot' as never }), 'kind'],
      [() => counting.sleeves.spawn({ stackId: 'nope', kind: 'ai' }), 'stackId'],
      [() => counting.sleeves.spawn({ stackId: key.stackId, kind: 'ai', tickRate: 5 }), 'tickRate'],
      [() => counting.memory.perceive({ sleeveId: ai, text: 42 as never }), 'text'],
      [() => counting.memory.perceive({ sleeveId: ai, text: 'a\u0000b' }), 'text'],
      [() => counting.memory.recall({ stackId: key.stackId, depth: 0 }), 'depth'],
      [() => counting.memory.recall({ stackId: key.stackId, depth: 1.5 }), 'depth'],
      [() => counting.memory.remember({ text: 'x' } as never), 'stackId'],
      [() => counting.needlecast.run({ from: ai, to: 'robot' }), 'to'],
      [() => counting.needlecast.run({ from: ai, to: 'ai', sagaId: 'needle:xyz' }), 'sagaId'],
      [() => counting.economy.faucet(''), 'stackId'],
      [async () => counting.subscribe('perceived', { stackId: key.stackId }, { after: 'abc' }), 'after'],
      [async () => counting.events({ subjects: ['perceive.*'] }), 'subjects[0]'],
    ];
    for (const [call, field] of cases) {
      const e = await call().then(
        () => null,
        (x) => x,
      );
      expect(e, field).toBeInstanceOf(CogInputError);
      expect(e.field, JSON.stringify(e?.toJSON?.())).toBe(field);
      expect(e.code).toBe('INVALID_INPUT');
      expect(e.errors).toEqual([{ path: field, message: expect.any(String) }]);
    }
    expect(sent).toBe(0);
  });

  it('reports platform problems with their code, status and detail', async () => {
    const e = await cog.memory.perceive({ sleeveId: 'sleeve:ai:999999:deadbeef', text: 'x' }).catch((x) => x);
    expect(e).toBeInstanceOf(CogProblem);
    expect([e.code, e.status]).toEqual(['NOT_FOUND', 404]);
    expect(e.detail).toContain('sleeve:ai:999999:deadbeef');
    const missing = await cog.stacks.get('stack:ai:999999:000000000000').catch((x) => x);
    expect([missing.code, missing.status]).toEqual(['NOT_FOUND', 404]);
    const proof = await cog.residues.submitProof({ id: 'residue:none', claimant: key.stackId, proof: { height: 1 } }).catch((x) => x);
    expect(proof).toBeInstanceOf(CogProblem);
    expect([proof.code, proof.status]).toEqual(['NOT_FOUND', 404]);
  });

  it('perceives, remembers, pins and recalls through signed requests', async () => {
    const p = await cog.memory.perceive({ sleeveId: ai, text: 'the sea is calm' });
    expect(p.cid).toMatch(/^cog:\/\/[0-9a-f]{64}@\d+$/);
    expect(p.thought).toContain('the sea is calm');
    const pinned = await cog.memory.pin({ stackId: key.stackId, text: 'my name is Ada' });
    expect(pinned.node.pinned).toBe(true);
    const r = await cog.memory.recall({ stackId: key.stackId, depth: 5 });
    expect(r.fragments.map((f) => f.text)).toEqual(expect.arrayContaining(['the sea is calm', 'my name is Ada']));
    expect(r.fidelity).toBe(1);
    expect((await cog.memory.node(pinned.cid)).pinned).toBe(true);
    expect((await cog.stacks.memory(key.stackId)).map((n) => n.cid)).toContain(p.cid);
    const synced = await cog.sleeves.sync(ai);
    expect([synced.ok, synced.sleeve.drift]).toEqual([true, 0]);
    expect((await cog.memory.stats()).nodes).toBeGreaterThan(0);
  });

  it('drips from the faucet, retries the cooldown 429 as Retry-After says, reads balances, claims', async () => {
    const before = await cog.economy.totals(key.stackId);
    const grant = await cog.economy.faucet(key.stackId);
    expect(grant.granted).toEqual({ compute: 100, memory: 100, sync: 100, routing: 100 });
    retries.length = 0;
    const t0 = Date.now();
    const again = await cog.economy.faucet(key.stackId); // inside the 1.5 s cooldown: 429, Retry-After 2 s
    expect(again.ok).toBe(true);
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(retries[0]).toMatch(/^RATE_LIMITED:\d+$/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    const after = await cog.economy.totals(key.stackId);
    expect(after.sleeveTotals.routing).toBeCloseTo(before.sleeveTotals.routing + 200, 5);
    // A wait beyond the bound is not taken: the problem comes back at once with its retryAfter.
    const strict = createClient({ url: cluster.gateway, key, retry: { maxDelayMs: 100 } });
    const e = await strict.economy.faucet(key.stackId).catch((x) => x);
    expect([e.code, e.status]).toEqual(['RATE_LIMITED', 429]);
    expect(e.extra.retryAfter).toBeGreaterThan(0);
    const sheet = await cog.economy.balances(key.stackId);
    expect(sheet.raw.compute).toBeGreaterThan(0);
    expect(sheet.cpv.syncCoeff).toBe(1);
    await cog.economy.claimable(key.stackId);
    const claim = await cog.economy.claim(key.stackId);
    expect(claim.stackId).toBe(key.stackId);
    expect(Array.isArray(await cog.economy.issuance(key.stackId))).toBe(true);
    expect(Array.isArray(await cog.residues.list({ first: 5 }))).toBe(true);
  });

  it('calls the /v1 REST routes typed from openapi.json, signed', async () => {
    const stack = await cog.rest.get('/v1/stacks/{id}', { params: { id: key.stackId } });
    expect(stack.id).toBe(key.stackId);
    const p = await cog.rest.post('/v1/sleeves/{id}/perceive', { params: { id: human }, body: { input: 'over REST' } });
    expect(p.cid).toMatch(/^cog:\/\//);
    // The one GET that writes (recall) is signed too, with its query string in the signed path.
    const r = await cog.rest.get('/v1/stacks/{id}/recall', { params: { id: key.stackId }, query: { depth: 2 } });
    expect(JSON.stringify(r)).toContain(p.cid);
    const unsigned = await anon.rest.post('/v1/sleeves/{id}/sync', { params: { id: human } }).catch((x) => x);
    expect([unsigned.code, unsigned.status]).toEqual(['UNAUTHORIZED', 401]);
    const missing = await cog.rest.get('/v1/needlecast/{sagaId}', { params: { sagaId: 'needle:' + '0'.repeat(32) } }).catch((x) => x);
    expect([missing.code, missing.status]).toEqual(['NOT_FOUND', 404]);
    const bad = await cog.rest.post('/v1/sleeves/{id}/perceive', { params: { id: '' }, body: { input: 'x' } }).catch((x) => x);
    expect(bad).toBeInstanceOf(CogInputError);
    expect(bad.field).toBe('params.id');
  });

  it('reads epochs and blocks', async () => {
    const epoch = await cog.chains.epoch();
    expect(epoch.tip).toMatch(/^[0-9a-f]{64}$/);
    const block = await cog.chains.block(epoch.height);
    expect(block.blockHash).toBe(epoch.tip);
    const health = await cog.health();
    expect(health.gateway.ok).toBe(true);
    expect(health.subgraphs.every((s) => s.ok)).toBe(true);
  });

  it('resumes a subscription after its socket drops, without a lost or repeated event', async () => {
    const socketsBefore = sockets.length;
    const sub = cog.subscribe('perceived', { stackId: key.stackId });
    const got: string[] = [];
    const first = sub.next();
    await until(async () => (sockets.length > socketsBefore ? true : undefined));
    const ws = sockets[sockets.length - 1] as unknown as WebSocket;
    await until(async () => (ws.readyState === 1 ? true : undefined));
    await new Promise((r) => setTimeout(r, 500)); // the router has registered the subscription
    const written: string[] = [];
    for (let i = 0; i < 2; i++) written.push((await cog.memory.perceive({ sleeveId: human, text: `live ${i}` })).cid);
    got.push((await first).value!.cid);
    got.push((await sub.next()).value!.cid);
    // Drop the connection abruptly (no close frame), write while it is down, then read on.
    ws.terminate();
    for (let i = 0; i < 3; i++) written.push((await cog.memory.perceive({ sleeveId: human, text: `offline ${i}` })).cid);
    for (let i = 0; i < 3; i++) got.push((await sub.next()).value!.cid);
    expect(got).toEqual(written);
    expect(Number(sub.cursor)).toBeGreaterThan(0);
    // And the cursor resumes a new subscription exactly after the last event.
    const later = (await cog.memory.perceive({ sleeveId: human, text: 'after' })).cid;
    const resumed = cog.subscribe('perceived', { stackId: key.stackId }, { after: sub.cursor });
    expect((await resumed.next()).value!.cid).toBe(later);
    await sub.close();
    await resumed.close();
  });

  it('resumes /v1/events after its socket drops, without a lost or repeated event', async () => {
    const socketsBefore = sockets.length;
    const stream = cog.events({ subjects: [`cog.perceive.${key.stackId}`] });
    await until(async () => (sockets.length > socketsBefore ? true : undefined));
    const ws = sockets[sockets.length - 1] as unknown as WebSocket;
    await until(async () => (ws.readyState === 1 ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    const written: string[] = [];
    const got: string[] = [];
    written.push((await cog.memory.perceive({ sleeveId: ai, text: 'stream 0' })).cid);
    got.push(String((await stream.next()).value!.data.cid));
    ws.terminate();
    for (let i = 1; i < 4; i++) written.push((await cog.memory.perceive({ sleeveId: ai, text: `stream ${i}` })).cid);
    for (let i = 1; i < 4; i++) got.push(String((await stream.next()).value!.data.cid));
    expect(got).toEqual(written);
    expect(stream.since).toBeGreaterThan(0);
    await stream.close();
  });

  it('needlecasts to another sleeve kind with a live line per saga step', async () => {
    const steps: string[] = [];
    const result = await cog.needlecast.run({ from: ai, to: 'memory' }, (s) => steps.push(`${s.step}:${s.status}`));
    expect(result.ok).toBe(true);
    expect(result.saga.status).toBe('completed');
    for (const s of ['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle']) expect(steps).toContain(`${s}:done`);
    expect(steps.at(-1)).toBe('saga:completed');
    expect(new Set(steps).size).toBe(steps.length);
    const target = await cog.sleeves.get(result.to!);
    expect([target.embodimentType, target.alive]).toEqual(['memory', true]);
    expect((await cog.sleeves.get(ai)).alive).toBe(false);
    expect((await cog.needlecast.saga(result.sagaId)).ok).toBe(true);
  });

  it('runs in a browser: the core bundles without Node modules and signs, subscribes and recalls in Chromium', async () => {
    const out = await build({
      entryPoints: [new URL('../src/index.ts', import.meta.url).pathname],
      bundle: true,
      platform: 'browser',
      format: 'iife',
      globalName: 'CogSDK',
      target: 'es2022',
      write: false,
      logLevel: 'silent',
    });
    const bundle = out.outputFiles[0]!.text;
    expect(bundle).not.toMatch(/require\(["']node:|from ["']node:/);
    // The gateway sends no CORS headers, so the test page (about:blank) calls it with web security off.
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-web-security',
      ],
    });
    try {
      const page = await browser.newPage();
      await page.addScriptTag({ content: bundle });
      const r = await page.evaluate(async (url) => {
        const sdk = (globalThis as any).CogSDK;
        const anon = sdk.createClient({ url });
        const { stack, key } = await anon.stacks.create({ name: 'in-a-browser' });
        const cog = anon.withKey(key);
        const sleeve = await cog.sleeves.spawn({ stackId: stack.id, kind: 'human' });
        const sub = cog.subscribe('perceived', { stackId: stack.id });
        const first = sub.next();
        await new Promise((res) => setTimeout(res, 1000));
        const p = await cog.memory.perceive({ sleeveId: sleeve.id, text: 'written from a browser' });
        const event = (await first).value;
        const recall = await cog.memory.recall({ stackId: stack.id, depth: 3 });
        const refused = await anon.sleeves.spawn({ stackId: stack.id, kind: 'ai' }).catch((e: any) => ({ code: e.code, name: e.name }));
        await sub.close();
        await cog.close();
        return { cid: p.cid, eventCid: event.cid, texts: recall.fragments.map((f: any) => f.text), refused, ua: navigator.userAgent };
      }, cluster.gateway);
      expect(r.ua).toMatch(/Chrome/);
      expect(r.eventCid).toBe(r.cid);
      expect(r.texts).toEqual(['written from a browser']);
      expect(r.refused).toEqual({ code: 'UNAUTHORIZED', name: 'CogProblem' });
    } finally {
      await browser.close();
    }
  }, 60_000);
});
