// Hippocampus peering without a cluster: a peer's payload is kept only when it hashes to its CID,
// so a corrupt or lying peer is skipped like a missing one, and a PUT /replica of the wrong bytes
// is refused and stores nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { testPlatform, type TestPlatform } from '../../../test/helpers/platform.ts';
import { createHttp, listen } from '../../../lib/http.ts';
import { createObjectStore } from '../../../lib/objects/index.ts';
import type { ObjectStore } from '../../../lib/objects/port.ts';
import { randomSecret, seal } from '../../../lib/crypto.ts';
import { computeCid, computeDataCid, parseCid, payloadKey } from './cid.ts';
import { payloadMatches, peeredObjects, replicaRoutes, startPinSync, type PeerOptions } from './peers.ts';
import { putNode } from './store.ts';

let p: TestPlatform;
let dir: string;
let good: { app: FastifyInstance; url: string; store: ObjectStore };
let liar: { app: FastifyInstance; url: string };
const key = randomSecret(32);

function node(text: string, epoch = 0) {
  const data = JSON.stringify(seal(key, text));
  const links: string[] = [];
  return { cid: computeCid({ data, links, epoch, stackId: 'stack:peer' }), data, links, epoch, stackId: 'stack:peer' };
}
const keyOf = (cid: string) => payloadKey(parseCid(cid)!.hash);

beforeAll(async () => {
  p = await testPlatform();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-peers-'));
  const store = await createObjectStore({ dir: path.join(dir, 'good') });
  const app = createHttp({ name: 'peer-good', log: p.log });
  await app.register(replicaRoutes, { local: store, platform: p });
  good = { app, store, url: `http://127.0.0.1:${await listen(app, 'peer-good', '127.0.0.1', 0)}` };
  // A peer that answers every replica read with other bytes (a test double for a broken node).
  const bad = createHttp({ name: 'peer-liar', log: p.log });
  bad.get('/replica/*', async (_req, reply) => reply.type('application/octet-stream').send(Buffer.from(JSON.stringify(seal(key, 'forged')))));
  liar = { app: bad, url: `http://127.0.0.1:${await listen(bad, 'peer-liar', '127.0.0.1', 0)}` };
});
afterAll(async () => {
  await good?.app.close();
  await liar?.app.close();
  await p?.cleanup();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('hippocampus peers', () => {
  it('checks a payload against the index row that names it (node form and data form)', async () => {
    const n = node('checked');
    await putNode(p.db.prisma, good.store, n, 0);
    const bytes = new TextEncoder().encode(n.data);
    expect(await payloadMatches(p.db.prisma, keyOf(n.cid), bytes)).toBe(true);
    expect(await payloadMatches(p.db.prisma, keyOf(n.cid), new TextEncoder().encode(`${n.data} `))).toBe(false);
    expect(await payloadMatches(p.db.prisma, keyOf(n.cid), new Uint8Array([0xff, 0xfe]))).toBe(false);
    expect(await payloadMatches(p.db.prisma, payloadKey('0'.repeat(64)), bytes)).toBe(false);
    const data = JSON.stringify(seal(key, 'data form'));
    const d = { cid: computeDataCid({ data, epoch: 0 }), data, links: [], epoch: 0, stackId: 'stack:peer' };
    await putNode(p.db.prisma, good.store, d, 0);
    expect(await payloadMatches(p.db.prisma, keyOf(d.cid), new TextEncoder().encode(data))).toBe(true);
    expect(await payloadMatches(p.db.prisma, keyOf(d.cid), bytes)).toBe(false);
  });

  it('skips a peer whose payload does not hash to the CID and takes the next one', async () => {
    const n = node('wanted');
    await putNode(p.db.prisma, good.store, n, 0);
    const local = await createObjectStore({ dir: path.join(dir, 'reader-1') });
    const lost: string[] = [];
    const o: PeerOptions = { peers: [liar.url, good.url], db: p.db.prisma, onLost: (k) => void lost.push(k) };
    const body = await peeredObjects(local, o).get(keyOf(n.cid));
    expect(new TextDecoder().decode(body!)).toBe(n.data);
    expect(new TextDecoder().decode((await local.get(keyOf(n.cid)))!)).toBe(n.data); // read repair kept the right bytes
    expect(lost).toEqual([]);

    // Only the liar: nothing is kept, and the key counts as lost.
    const alone = await createObjectStore({ dir: path.join(dir, 'reader-2') });
    expect(await peeredObjects(alone, { ...o, peers: [liar.url] }).get(keyOf(n.cid))).toBeNull();
    expect(await alone.has(keyOf(n.cid))).toBe(false);
    expect(lost).toEqual([keyOf(n.cid)]);
  });

  it('anti-entropy pulls only verified pinned payloads', async () => {
    const n = { ...node('pinned'), pinned: true };
    await putNode(p.db.prisma, good.store, n, 0);
    const fromLiar = await createObjectStore({ dir: path.join(dir, 'sync-1') });
    expect(await startPinSync(p, fromLiar, { peers: [liar.url], db: p.db.prisma }, 60_000).runOnce()).toBe(0);
    expect(await fromLiar.has(keyOf(n.cid))).toBe(false);
    const fromGood = await createObjectStore({ dir: path.join(dir, 'sync-2') });
    const sync = startPinSync(p, fromGood, { peers: [liar.url, good.url], db: p.db.prisma }, 60_000);
    expect(await sync.runOnce()).toBe(1);
    sync.stop();
    expect(new TextDecoder().decode((await fromGood.get(keyOf(n.cid)))!)).toBe(n.data);
  });

  it('refuses a PUT /replica of bytes that do not hash to the CID, storing nothing', async () => {
    const n = node('pushed');
    await putNode(p.db.prisma, await createObjectStore({ dir: path.join(dir, 'origin') }), n, 0);
    const url = `${good.url}/replica/${keyOf(n.cid)}`;
    const put = (body: string) => fetch(url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body });
    const wrong = await put(JSON.stringify(seal(key, 'other')));
    expect(wrong.status).toBe(422);
    expect(wrong.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(((await wrong.json()) as { code: string }).code).toBe('PAYLOAD_MISMATCH');
    expect(await good.store.has(keyOf(n.cid))).toBe(false);
    expect((await put(n.data)).status).toBe(201);
    expect(new TextDecoder().decode((await good.store.get(keyOf(n.cid)))!)).toBe(n.data);
  });
});
