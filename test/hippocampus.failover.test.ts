// Hippocampus client failover (HIPPOCAMPUS_URL, then HIPPOCAMPUS_FALLBACK_URLS): two real
// Hippocampus services in this process sharing one index and store, a primary that is closed,
// hung (accepts, never answers: what SIGSTOP looks like) or answering 500; all nodes down is a quick
// 503 problem; the Thalamus's DAG source endpoint; and the deploy files naming the fallbacks.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { randomSecret, seal } from '../lib/crypto.ts';
import { ConfigError, loadConfig } from '../lib/config.ts';
import type { Problem } from '../lib/errors.ts';
import type { RunningService } from '../lib/service.ts';
import { startHippocampus } from '../subgraphs/memory/hippocampus/service.ts';
import { computeCid, parseCid, payloadKey } from '../subgraphs/memory/hippocampus/cid.ts';
import { hippocampusClient, httpHippocampus } from '../subgraphs/memory/hippocampus/client.ts';
import { memoryTestApp } from './helpers/memory-app.ts';
import { topology } from '../bin/up.ts';
import { freePort } from '../bench/load.ts';

const key = randomSecret(32);
function node(text: string, epoch: number, links: string[] = [], stackId = 'stack:failover') {
  const data = JSON.stringify(seal(key, text));
  return { cid: computeCid({ data, links, epoch, stackId }), data, links, epoch, stackId };
}

/** What a node's failure in `fn` became: the Problem's status and how long it took. */
async function failure(fn: () => Promise<unknown>): Promise<{ status: number; code: string; detail: string; ms: number }> {
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    const pr = e as Problem;
    return { status: pr.status, code: pr.code, detail: pr.detail ?? '', ms: Date.now() - t0 };
  }
  throw new Error('expected a failure');
}

describe('hippocampus client failover', () => {
  let p: TestPlatform;
  let h1: RunningService;
  let h2: RunningService;
  let hung: net.Server;
  let failing: http.Server;
  let hungUrl: string;
  let failingUrl: string;
  let deadUrl: string;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    p = await testPlatform({ HIPPOCAMPUS_PORT: '0' });
    p.setEpoch(5);
    h1 = await startHippocampus(p);
    h2 = await startHippocampus(p);
    // Accepts connections and never answers.
    hung = net.createServer((s) => void sockets.add(s));
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
    hungUrl = `http://127.0.0.1:${(hung.address() as net.AddressInfo).port}`;
    failing = http.createServer((_, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{"code":"INTERNAL"}'));
    await new Promise<void>((r) => failing.listen(0, '127.0.0.1', r));
    failingUrl = `http://127.0.0.1:${(failing.address() as net.AddressInfo).port}`;
    deadUrl = `http://127.0.0.1:${await freePort()}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    hung?.close();
    failing?.close();
    await h2?.close();
    await h1?.close().catch(() => {});
    await p?.cleanup();
  });

  it('puts, reads, walks and lists through the fallback when the primary is down, hung or failing', async () => {
    const a = node('a', 5);
    const b = node('b', 5, [a.cid]);
    await httpHippocampus(h2.url!).put(a); // warm: the first PGlite statements are slow
    for (const primary of [deadUrl, hungUrl, failingUrl]) {
      // 2.5 s an attempt: the fallback's own answer (a put on the shared PGlite, fsynced) passed
      // 1.5 s on a loaded CI runner.
      const c = httpHippocampus([primary, h2.url!], { timeoutMs: 2500 });
      const n = node(`via ${primary}`, 5, [b.cid]);
      const t0 = Date.now();
      await c.put(a);
      await c.put(b);
      await c.put(n);
      await c.pin(a.cid);
      expect((await c.meta(n.cid))?.links).toEqual([b.cid]);
      expect(await c.meta(node('unknown', 5).cid)).toBeNull(); // a 404 is the answer, not a failure
      const walk = await c.walk(n.cid, 3, 5);
      expect(walk.nodes.map((x) => x.cid)).toEqual([n.cid, b.cid, a.cid]);
      expect(await c.epochWrites(5)).toEqual(expect.arrayContaining([a.cid, b.cid, n.cid]));
      expect((await c.stats()).nodes).toBeGreaterThanOrEqual(3);
      // A dead or hung node costs one attempt, not one per call (it is tried last for a while):
      // one per call would be nine of 2.5 s.
      expect(Date.now() - t0, primary).toBeLessThan(8000);
    }
    // A 4xx is the answer: no failover, no 503.
    const c = httpHippocampus([h1.url!, h2.url!]);
    expect(await failure(() => c.put({ ...a, stackId: 'stack:other' }))).toMatchObject({ status: 400, code: 'CID_MISMATCH' });
  });

  it('with the primary stopped, a platform client configured by HIPPOCAMPUS_FALLBACK_URLS goes on through the other node', async () => {
    const q = await testPlatform({ HIPPOCAMPUS_URL: h1.url!, HIPPOCAMPUS_FALLBACK_URLS: `${h2.url!}/`, HIPPOCAMPUS_TIMEOUT_MS: '2000' });
    try {
      expect(q.config.hippocampusFallbacks).toEqual([h2.url]);
      const n = node('before the stop', 5);
      await hippocampusClient(q).put(n);
      await h1.close();
      const m = node('after the stop', 5, [n.cid]);
      await hippocampusClient(q).put(m);
      expect((await hippocampusClient(q).walk(m.cid, 2, 5)).nodes.map((x) => x.cid)).toEqual([m.cid, n.cid]);
      expect(await hippocampusClient(q).epochWrites(5)).toEqual(expect.arrayContaining([n.cid, m.cid]));
    } finally {
      await q.cleanup();
    }
  });

  it('with every node down or hung: a 503 unavailable quickly, naming each node', async () => {
    const dead = httpHippocampus([deadUrl, `http://127.0.0.1:${await freePort()}`], { timeoutMs: 300 });
    const f1 = await failure(() => dead.walk(node('x', 5).cid, 2, 5));
    expect(f1).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    expect(f1.detail).toMatch(/not reachable.*not reachable/);
    expect(f1.ms).toBeLessThan(1000);
    const hungToo = httpHippocampus([hungUrl, failingUrl], { timeoutMs: 300 });
    const f2 = await failure(() => hungToo.put(node('y', 5)));
    expect(f2).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    expect(f2.detail).toMatch(/timed out/);
    expect(f2.detail).toMatch(/answered 500/);
    expect(f2.ms).toBeLessThan(2000);
    // Both now failed recently: one call at a time probes each (≤ 1 s), concurrent ones skip them.
    const many = await Promise.all(Array.from({ length: 6 }, () => failure(() => hungToo.walk(node('z', 5).cid, 1, 5))));
    for (const f of many) expect(f).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    expect(many.filter((f) => /failed recently.*failed recently/.test(f.detail)).length).toBeGreaterThanOrEqual(4);
    expect(Math.max(...many.map((f) => f.ms))).toBeLessThan(2500);
  });

  it('GET /epochs/:epoch/writes lists the epoch in write order; a bad epoch is a 400', async () => {
    const first = node('w1', 6);
    const second = node('w2', 6, [first.cid]);
    p.setEpoch(6);
    const c = httpHippocampus(h2.url!);
    await c.put(first);
    await c.put(second);
    expect(await c.epochWrites(6)).toEqual([first.cid, second.cid]);
    expect(await c.epochWrites(999)).toEqual([]);
    for (const bad of ['abc', '-1', '1.5', '9'.repeat(20)]) {
      const r = await fetch(`${h2.url}/epochs/${bad}/writes`);
      expect(r.status, bad).toBe(400);
      expect(r.headers.get('content-type')).toMatch(/problem\+json/);
    }
  });
});

it('the Hippocampus endpoints the Thalamus reads need the internal token when one is set', async () => {
  const token = 'failover-internal-token-0123456789';
  const p = await testPlatform({ HIPPOCAMPUS_PORT: '0', COG_INTERNAL_TOKEN: token });
  const h = await startHippocampus(p);
  try {
    expect((await fetch(`${h.url}/epochs/1/writes`)).status).toBe(401);
    expect(await httpHippocampus(h.url!, { internalToken: token }).epochWrites(1)).toEqual([]);
  } finally {
    await h.close();
    await p.cleanup();
  }
});

it("with no Hippocampus node answering, a recall of the platform's own nodes goes on (read with the stack), one that needs a node answers a 503 problem+json quickly, and perceive goes on", async () => {
  const t = await memoryTestApp();
  try {
    const stack = (await t.app.inject({ method: 'POST', url: '/v1/stacks', payload: { name: 'failover' } })).json();
    const sleeve = (await t.app.inject({ method: 'POST', url: '/v1/sleeves', payload: { stackId: stack.id, embodimentType: 'ai' } })).json();
    const one = await t.app.inject({ method: 'POST', url: `/v1/sleeves/${sleeve.id}/perceive`, payload: { input: 'one' } });
    expect(one.statusCode).toBe(200);
    // As a process without the Hippocampus in it whose nodes are both gone.
    delete t.p.ports.hippocampus;
    t.p.config.urls.hippocampus = `http://127.0.0.1:${await freePort()}`;
    t.p.config.hippocampusFallbacks = [`http://127.0.0.1:${await freePort()}`];
    // The node's payload is in its index row: the recall reads it with the stack.
    const ok = await t.app.inject({ method: 'POST', url: '/v1/recall', payload: { stackId: stack.id, depth: 2 } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ fragments: [{ text: 'one' }], broken: 0 });
    // A payload in the object store (as a node PUT through the Hippocampus API) needs a node.
    const cid = one.json().cid as string;
    const row = await t.p.db.prisma.memoryNode.findUniqueOrThrow({ where: { cid } });
    await t.p.objects.put(payloadKey(parseCid(cid)!.hash), new TextEncoder().encode(row.payload!));
    await t.p.db.prisma.memoryNode.update({ where: { cid }, data: { payload: null } });
    const t0 = Date.now();
    const r = await t.app.inject({ method: 'GET', url: `/v1/stacks/${stack.id}/recall?depth=2` });
    expect(r.statusCode).toBe(503);
    expect(r.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(r.headers['retry-after']).toBeDefined();
    expect(r.json()).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    expect(Date.now() - t0).toBeLessThan(2000);
    // A write's payload commits with its index row (flows/memory.ts): no Hippocampus on its way.
    const w = await t.app.inject({ method: 'POST', url: `/v1/sleeves/${sleeve.id}/perceive`, payload: { input: 'two' } });
    expect(w.statusCode).toBe(200);
    expect(await t.p.db.prisma.memoryNode.count({ where: { stackId: stack.id } })).toBe(2);
  } finally {
    await t.close();
  }
});

describe('config and topology', () => {
  it('HIPPOCAMPUS_FALLBACK_URLS and HIPPOCAMPUS_TIMEOUT_MS are validated', () => {
    expect(loadConfig({}).hippocampusFallbacks).toEqual([]);
    expect(loadConfig({}).hippocampusTimeoutMs).toBe(2500);
    expect(loadConfig({ HIPPOCAMPUS_FALLBACK_URLS: 'http://a:1, http://b:2/' }).hippocampusFallbacks).toEqual(['http://a:1', 'http://b:2']);
    expect(() => loadConfig({ HIPPOCAMPUS_FALLBACK_URLS: 'http://a:1,not a url' })).toThrow(ConfigError);
    expect(() => loadConfig({ HIPPOCAMPUS_FALLBACK_URLS: 'nope' })).toThrow(/HIPPOCAMPUS_FALLBACK_URLS/);
    for (const bad of ['0', '50', 'x', '1e9']) expect(() => loadConfig({ HIPPOCAMPUS_TIMEOUT_MS: bad }), bad).toThrow(/HIPPOCAMPUS_TIMEOUT_MS/);
  });

  it('every Hippocampus client in the distributed topology has the other node as fallback, and compose.yaml says so too', () => {
    const cfg = loadConfig({});
    const h1 = `http://127.0.0.1:${cfg.ports.hippocampus}`;
    const h2 = `http://127.0.0.1:${cfg.ports.hippocampus + 1}`;
    const specs = topology(cfg);
    const clients = [
      'thalamus',
      'dhf',
      'needlecast',
      'sleeve-runtime-1',
      'sleeve-runtime-2',
      'worker-1',
      'worker-2',
      'subgraph-memory',
      'subgraph-residues',
      'gateway-1',
      'gateway-2',
    ];
    for (const s of specs) {
      if (!clients.includes(s.name)) {
        expect(s.env.HIPPOCAMPUS_FALLBACK_URLS, s.name).toBeUndefined();
        continue;
      }
      const primary = s.env.HIPPOCAMPUS_URL ?? h1;
      expect([primary, s.env.HIPPOCAMPUS_FALLBACK_URLS].sort(), s.name).toEqual([h1, h2]);
    }
    expect(specs.find((s) => s.name === 'gateway-1')!.env.HIPPOCAMPUS_URL ?? h1).toBe(h1);
    expect(specs.find((s) => s.name === 'gateway-2')!.env.HIPPOCAMPUS_URL).toBe(h2);
    // compose.yaml: one service per process in the same order, with the process's own settings.
    const doc = parse(fs.readFileSync(new URL('../deploy/compose.yaml', import.meta.url), 'utf8')) as {
      services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
    };
    const services = Object.values(doc.services).filter((s) => s.command?.[0] === 'node');
    const shared = new Set(['DATABASE_URL', 'NATS_URL', 'REDIS_URL', 'S3_ENDPOINT', 'S3_BUCKET', 'COG_MASTER_KEY', 'COG_INTERNAL_TOKEN']);
    specs.forEach((s, i) => {
      const own = Object.fromEntries(Object.entries(services[i]!.environment ?? {}).filter(([k]) => !shared.has(k) && k !== '<<'));
      expect(own, s.name).toEqual(s.env);
    });
  });
});
