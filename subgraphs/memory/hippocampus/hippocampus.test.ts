// The Hippocampus over HTTP: content addressing, gating, pins, the walk, stats, pruning.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { testPlatform, type TestPlatform } from '../../../test/helpers/platform.ts';
import { randomSecret, seal } from '../../../lib/crypto.ts';
import type { RunningService } from '../../../lib/service.ts';
import { startHippocampus } from './service.ts';
import { computeCid, parseCid, payloadKey } from './cid.ts';
import { httpHippocampus } from './client.ts';
import { dagWritesInEpoch, pruneForgotten } from './store.ts';

let p: TestPlatform;
let svc: RunningService;
beforeAll(async () => {
  p = await testPlatform({ HIPPOCAMPUS_PORT: '0', COG_RETENTION_EPOCHS: '5', HIPPOCAMPUS_PEERS: 'http://a:1,http://b:2' });
  svc = await startHippocampus(p);
});
afterAll(async () => {
  await svc?.close();
  await p?.cleanup();
});

const key = randomSecret(32);
function node(text: string, epoch: number, links: string[] = [], stackId = 'stack:test') {
  const data = JSON.stringify(seal(key, text));
  return { cid: computeCid({ data, links, epoch, stackId }), data, links, epoch, stackId };
}
const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};
const e = encodeURIComponent;

describe('hippocampus', () => {
  it('stores content-addressed nodes and refuses mismatched or malformed ones', async () => {
    p.setEpoch(4);
    const n = node('a', 4);
    expect(await call('PUT', '/dag', n)).toMatchObject({ status: 201, body: { cid: n.cid, created: true } });
    expect((await call('PUT', '/dag', n)).status).toBe(200);
    expect(parseCid(n.cid)).toEqual({ hash: n.cid.slice(6, 70), epoch: 4 });
    expect(await p.objects.has(payloadKey(parseCid(n.cid)!.hash))).toBe(true);
    const before = await p.db.prisma.memoryNode.count();
    const bad = [
      { ...n, links: ['cog://x@1'] },
      { ...n, cid: n.cid.replace(/@4$/, '@3') },
      { ...n, data: n.data.replace('"v":1', '"v":2') },
      { ...n, data: 'not json' },
      { ...n, epoch: 99 },
      { ...n, epoch: -1 },
      { ...n, stackId: '' },
      { cid: n.cid },
    ];
    for (const b of bad) expect((await call('PUT', '/dag', b)).status, JSON.stringify(b).slice(0, 120)).toBe(400);
    const mismatch = await call('PUT', '/dag', { ...n, stackId: 'stack:other' });
    expect(mismatch).toMatchObject({ status: 400, body: { code: 'CID_MISMATCH' } });
    expect(await p.db.prisma.memoryNode.count()).toBe(before);
  });

  it('gates reads to within 2 epochs unless pinned; 404 unknown; 400 future or bad epoch', async () => {
    p.setEpoch(10);
    const n = node('gated', 6);
    await call('PUT', '/dag', n);
    const ok = await call('GET', `/dag/${e(n.cid)}?epoch=8`);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ cid: n.cid, links: [], epoch: 6, kind: 'episodic', pinned: false, stackId: 'stack:test' });
    expect(ok.body.ciphertext).toEqual(JSON.parse(n.data));
    expect((await call('GET', `/dag/${n.cid}?epoch=4`)).status).toBe(200); // raw cog:// in the path works too
    expect(await call('GET', `/dag/${e(n.cid)}?epoch=9`)).toMatchObject({ status: 410, body: { code: 'GATED' } });
    expect((await call('GET', `/dag/${e(n.cid)}`)).status).toBe(410); // default: the current epoch
    expect((await call('GET', `/dag/${e(n.cid)}?epoch=11`)).status).toBe(400);
    expect((await call('GET', `/dag/${e(n.cid)}?epoch=x`)).status).toBe(400);
    expect((await call('GET', `/dag/${e(node('nope', 1).cid)}?epoch=1`)).status).toBe(404);
    expect((await call('GET', `/dag/garbage?epoch=1`)).status).toBe(404);
    expect(await call('POST', `/dag/${e(n.cid)}/pin`)).toMatchObject({ status: 200, body: { cid: n.cid, pinned: true } });
    expect((await call('GET', `/dag/${e(n.cid)}?epoch=10`)).body.pinned).toBe(true);
    expect((await call('POST', `/dag/${e(node('nope', 1).cid)}/pin`)).status).toBe(404);
    expect((await call('GET', `/dag/${e(n.cid)}/meta`)).body).toMatchObject({ cid: n.cid, stackId: 'stack:test', pinned: true });
  });

  it('walks breadth-first, newest first, following links of gated nodes and reporting missing ones', async () => {
    p.setEpoch(20);
    const lost = node('lost', 12);
    const old = node('old', 14, [lost.cid]);
    const mid1 = node('mid1', 19, [old.cid]);
    const mid2 = node('mid2', 20, [old.cid]);
    const root = node('root', 20, [mid1.cid, mid2.cid]);
    for (const n of [old, mid1, mid2, root]) expect((await call('PUT', '/dag', n)).status).toBe(201);
    const w = await call('POST', '/recall', { root: root.cid, depth: 10, epoch: 20 });
    expect(w.status).toBe(200);
    expect(w.body.nodes.map((n: { cid: string }) => n.cid)).toEqual([root.cid, mid2.cid, mid1.cid]);
    expect(w.body.gated).toEqual([old.cid]);
    expect(w.body.missing).toEqual([lost.cid]);
    expect(w.body.levels).toBe(4);
    const w2 = await call('POST', '/recall', { root: root.cid, depth: 2, epoch: 20 });
    expect(w2.body).toMatchObject({ gated: [], missing: [], levels: 2 });
    for (const b of [
      { root: root.cid, depth: 0, epoch: 1 },
      { root: root.cid, depth: 2, epoch: 21 },
      { root: root.cid, depth: 'x', epoch: 1 },
    ]) {
      expect((await call('POST', '/recall', b)).status).toBe(400);
    }
    // the HTTP client sees the same walk
    const client = httpHippocampus(svc.url!);
    expect((await client.walk(root.cid, 10, 20)).nodes).toHaveLength(3);
    expect(await client.meta(node('unknown', 1).cid)).toBeNull();
    expect(await dagWritesInEpoch(p.db.prisma, 20)).toEqual([mid2.cid, root.cid]);
  });

  it('health and stats, and pruning forgets only unpinned nodes past the retention window', async () => {
    const h = await call('GET', '/health');
    expect(h.body).toMatchObject({ ok: true, name: 'hippocampus' });
    const s1 = await call('GET', '/stats');
    expect(s1.body).toEqual({ nodes: h.body.nodes, peers: 2, pinned: 1 });
    p.setEpoch(20); // retention 5: epochs < 15 go, unless pinned (the epoch-6 node is pinned)
    const { pruned } = await pruneForgotten(p);
    expect(pruned).toBe(2); // epoch 4 and epoch 14
    const s2 = await call('GET', '/stats');
    expect(s2.body).toEqual({ nodes: s1.body.nodes - 2, peers: 2, pinned: 1 });
    const keys = await p.objects.list('dag/');
    expect(keys).toHaveLength(s2.body.nodes);
  });
  it('also takes the data-form CID (sha256 of the payload alone) and opaque payloads', async () => {
    p.setEpoch(4);
    const data = 'opaque encrypted payload 0001';
    const cid = `cog://${createHash('sha256').update(data).digest('hex')}@4`;
    expect(await call('PUT', '/dag', { cid, data, links: [], epoch: 4, stackId: 'stack:ext' })).toMatchObject({ status: 201 });
    const got = await call('GET', `/dag/${e(cid)}?epoch=4`);
    expect(got).toMatchObject({
      status: 200,
      body: { cid, data, ciphertext: null, links: [], epoch: 4, pinned: false, stackId: 'stack:ext', kind: 'episodic' },
    });
    const wrong = await call('PUT', '/dag', { cid, data: data + 'x', links: [], epoch: 4, stackId: 'stack:ext' });
    expect(wrong).toMatchObject({ status: 400, body: { code: 'CID_MISMATCH' } });
  });
});
