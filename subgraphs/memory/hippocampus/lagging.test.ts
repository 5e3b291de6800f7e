// A Hippocampus whose epoch view lags the chain (its bus events late): a caller that names a newer
// epoch (a gateway that just mined a block) makes it ask Medulla before refusing the epoch as future.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from '../../../test/helpers/platform.ts';
import { randomSecret, seal } from '../../../lib/crypto.ts';
import { followEpochs } from '../../../lib/epoch.ts';
import type { RunningService } from '../../../lib/service.ts';
import { startHippocampus } from './service.ts';
import { computeCid } from './cid.ts';

let p: TestPlatform;
let svc: RunningService;
/** What Medulla's getinfo answers; no bus event is ever published here. */
let medulla = 5;
let reads = 0;

beforeAll(async () => {
  p = await testPlatform({ HIPPOCAMPUS_PORT: '0' });
  p.epochs = await followEpochs(p.bus, async () => {
    reads++;
    return { epoch: medulla, height: medulla, tip: medulla.toString(16).padStart(64, '0') };
  });
  svc = await startHippocampus(p);
});
afterAll(async () => {
  await svc?.close();
  await p?.epochs.close();
  await p?.cleanup();
});

const key = randomSecret(32);
function node(text: string, epoch: number) {
  const data = JSON.stringify(seal(key, text));
  return { cid: computeCid({ data, links: [], epoch, stackId: 'stack:lag' }), data, links: [], epoch, stackId: 'stack:lag' };
}
const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

describe('hippocampus behind the chain', () => {
  it('reads at an epoch it had not heard of once Medulla confirms it, and still refuses one Medulla has not reached', async () => {
    const n = node('old', 5);
    expect((await call('PUT', '/dag', n)).status).toBe(201);
    medulla = 12;
    const before = reads;
    // Epoch 12 is real (Medulla says so): the walk runs and gates the epoch-5 node.
    const w = await call('POST', '/recall', { root: n.cid, depth: 3, epoch: 12 });
    expect(w.status).toBe(200);
    expect(w.body.gated).toEqual([n.cid]);
    expect((await call('GET', `/dag/${encodeURIComponent(n.cid)}?epoch=12`)).status).toBe(410);
    expect(reads).toBe(before + 1); // asked once; the second call already knew
    // Beyond Medulla's tip it is still the future.
    expect(await call('POST', '/recall', { root: n.cid, depth: 3, epoch: 13 })).toMatchObject({ status: 400 });
    expect((await call('GET', `/dag/${encodeURIComponent(n.cid)}?epoch=13`)).status).toBe(400);
  });

  it('stores a node written at an epoch it had not heard of once Medulla confirms it', async () => {
    medulla = 20;
    const n = node('new', 20);
    expect((await call('PUT', '/dag', n)).status).toBe(201);
    expect((await call('PUT', '/dag', node('far', 23))).status).toBe(400);
  });
});
