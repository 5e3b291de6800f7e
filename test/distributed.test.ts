// `cog up --distributed` end to end: every service its own process against this machine's
// PostgreSQL (a fresh database), NATS JetStream (a unique stream) and Redis (a unique prefix), on
// ports shifted by +21000. The REST smoke flow through both gateways, GraphQL through both, two
// Medulla nodes (one mining) on one chain, two Hippocampus nodes replicating pinned nodes and
// fetching from each other, a known CID no node can serve opening a shard-loss residue, and two
// sleeve runtimes sharing the sleeves, one killed with -9 and its sleeves served by the other. Then
// the black-box end-to-end suite (test/e2e/suite.ts) against the same cluster, through both gateways.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { startCluster, call, type Cluster } from './helpers/cluster.ts';
import { expectGatedRead, registerE2eSuite } from './e2e/suite.ts';
import { registerSubscriptionSuite } from './e2e/subscriptions.ts';
import { randomSecret, seal } from '../lib/crypto.ts';
import { computeCid } from '../subgraphs/memory/hippocampus/cid.ts';

let c: Cluster;
const post = (base: string, p: string, body?: unknown) => call('POST', `${base}${p}`, body ?? {});
const get = (base: string, p: string) => call('GET', `${base}${p}`);
const hashOf = (cid: string) => /^cog:\/\/([0-9a-f]{64})@\d+$/.exec(cid)![1]!;
const epochOf = (cid: string) => Number(/@(\d+)$/.exec(cid)![1]);
const epochAt = async (g: string) => (await get(g, '/v1/epochs/current')).body.epoch as number;

beforeAll(async () => {
  c = await startCluster({ mode: 'distributed', shift: 21000 });
  // 23 processes load on two cores, beside another test file: 40-50 s alone, several times that in a busy CI run.
  await c.waitHealthy(240_000);
}, 260_000);

afterAll(async () => {
  await c?.stop();
}, 30_000);

describe('cog up --distributed', () => {
  let stackId = '';
  let sleeveId = '';
  const cids: string[] = [];

  it('runs every service as its own process, two of each peered node and of the stateless ones', async () => {
    for (const name of [
      'cortex',
      'medulla-1',
      'medulla-2',
      'hippocampus-1',
      'hippocampus-2',
      'gateway-1',
      'gateway-2',
      'faucet-1',
      'faucet-2',
      'worker-1',
      'worker-2',
      'sleeve-runtime-1',
      'sleeve-runtime-2',
      'subgraph-memory',
    ]) {
      expect(c.pidOf(name), name).toBeGreaterThan(0);
    }
    expect(new Set(['gateway-1', 'gateway-2', 'worker-1', 'worker-2'].map((n) => c.pidOf(n))).size).toBe(4);
    const m1 = (await get(c.urls.medulla!, '/health')).body;
    const m2 = (await get(c.urls.medulla2!, '/health')).body;
    expect(m1).toMatchObject({ node: 'medulla-1', peers: 1, mining: true });
    expect(m2).toMatchObject({ node: 'medulla-2', peers: 1, mining: false });
    for (const h of [c.urls.hippocampus!, c.urls.hippocampus2!]) expect((await get(h, '/stats')).body.peers).toBe(1);
  });

  it('serves the REST smoke flow through both gateways', async () => {
    const s = await post(c.gateway, '/v1/stacks', { name: 'dist' });
    expect(s.status).toBe(201);
    stackId = s.body.id;
    const sl = await post(c.gateway2, '/v1/sleeves', { stackId, embodimentType: 'ai' });
    expect(sl.status).toBe(201);
    sleeveId = sl.body.id;
    for (const [i, g] of [c.gateway, c.gateway2, c.gateway, c.gateway2].entries()) {
      const r = await post(g, `/v1/sleeves/${sleeveId}/perceive`, { input: `thought ${i}` });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      cids.push(r.body.cid);
    }
    // Each gateway talks to its own Hippocampus node: a recall through either walks all four. The
    // nodes are unpinned, a fragment while the reader's epoch is within 2 of theirs; this cluster is
    // slow on a loaded machine, so each recall is checked against the epochs just before and after it
    // (every node is a fragment, fidelity 1, when no epoch moves past the oldest).
    const chain = [...cids].reverse().map((cid) => ({ cid, epoch: epochOf(cid) }));
    for (const g of [c.gateway, c.gateway2]) {
      const ea = await epochAt(g);
      const r = await get(g, `/v1/stacks/${stackId}/recall?depth=10`);
      const eb = await epochAt(g);
      expect(r.status).toBe(200);
      const read = r.body.fragments.map((f: { cid: string }) => f.cid);
      expect(r.body.broken).toEqual(expectGatedRead(chain, read, ea, eb));
      expect(r.body.fidelity).toBeCloseTo(read.length / 4, 9);
    }
    const ea = await epochAt(c.gateway2);
    const b = await post(c.gateway2, '/v1/recall', { stackId, depth: 2 });
    const eb = await epochAt(c.gateway2);
    expect(b.status).toBe(200);
    const readB = b.body.fragments.map((f: { cid: string }) => f.cid);
    expect(b.body.broken).toBe(expectGatedRead(chain.slice(0, 2), readB, ea, eb).length);
    const drip = await post(c.gateway2, '/v1/faucet/drip', { stackId });
    expect(drip.status, JSON.stringify(drip.body)).toBe(200);
    expect(drip.body.granted.compute).toBeGreaterThan(0);
    const again = await post(c.urls.faucet2!, '/v1/faucet/drip', { stackId });
    expect(again.status).toBe(429); // the cooldown is shared through Redis
    const read = await get(c.gateway2, `/v1/stacks/${stackId}`);
    expect(read.body.episodicHead).toBe(cids.at(-1));
  });

  it('needlecasts through the router process', async () => {
    const target = await post(c.gateway, '/v1/sleeves', { stackId, embodimentType: 'human' });
    const n = await post(c.gateway2, '/v1/needlecast', { from: sleeveId, to: target.body.id });
    expect(n.status, JSON.stringify(n.body)).toBe(200);
    expect(n.body).toMatchObject({ ok: true, shards: 4 });
    const src = await get(c.gateway, `/v1/stacks/${stackId}`);
    expect(src.body.sleeves.find((x: { id: string }) => x.id === sleeveId).alive).toBe(false);
    sleeveId = target.body.id;
  });

  it('advances epochs, seen the same through both gateways and both Medulla nodes', async () => {
    const e0 = (await get(c.gateway, '/v1/epochs/current')).body.epoch as number;
    await expect.poll(async () => (await get(c.gateway2, '/v1/epochs/current')).body.epoch, { timeout: 30_000, interval: 500 }).toBeGreaterThan(e0);
    await expect
      .poll(
        async () => {
          const [a, b] = await Promise.all([get(c.urls.medulla!, '/health'), get(c.urls.medulla2!, '/health')]);
          return a.body.height > 0 && Math.abs(a.body.height - b.body.height) <= 1;
        },
        { timeout: 20_000, interval: 500 },
      )
      .toBe(true);
  });

  it('answers GraphQL through both gateways (subgraphs over HTTP)', async () => {
    const query = `query($id: ID!) { stack(id: $id) { id name sleeves { id alive } } currentEpoch { epoch } hippocampusStats { nodes peers pinned } }`;
    for (const g of [c.gateway, c.gateway2]) {
      const r = await post(g, '/graphql', { query, variables: { id: stackId } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.errors).toBeUndefined();
      expect(r.body.data.stack.id).toBe(stackId);
      expect(r.body.data.stack.sleeves).toHaveLength(2);
      expect(r.body.data.hippocampusStats.peers).toBe(1);
      expect(r.body.data.hippocampusStats.nodes).toBeGreaterThanOrEqual(4);
    }
  });

  /** A node as a client of the Hippocampus API PUTs it (its payload goes to the node's own store). */
  const apiNode = (text: string, epoch: number, pinned = false) => {
    const data = JSON.stringify(seal(randomSecret(32), text));
    return { cid: computeCid({ data, links: [], epoch, stackId }), data, links: [], epoch, stackId, pinned };
  };
  const currentEpoch = async () => (await get(c.gateway, '/v1/epochs/current')).body.epoch as number;

  it("replicates pinned nodes PUT through the Hippocampus API to the peer node; the platform's own writes are served by both", async () => {
    const r = await post(c.gateway, `/v1/stacks/${stackId}/remember`, { text: 'keep me', pin: true });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // The platform's writes keep their payloads in the shared index: both nodes serve them, no replica needed.
    for (const h of [c.urls.hippocampus!, c.urls.hippocampus2!])
      for (const cid of [r.body.cid as string, ...cids]) expect((await get(h, `/dag/${encodeURIComponent(cid)}?epoch=${epochOf(cid)}`)).status, cid).toBe(200);
    // A pinned node PUT to hippocampus-1: hippocampus-2 holds it in its own store.
    const n = apiNode('kept through the API', await currentEpoch(), true);
    expect((await call('PUT', `${c.urls.hippocampus}/dag`, n)).status).toBe(201);
    const key = `dag/${hashOf(n.cid)}`;
    await expect.poll(async () => (await get(c.urls.hippocampus2!, `/replica/${key}`)).status, { timeout: 15_000, interval: 300 }).toBe(200);
    expect((await get(c.urls.hippocampus!, `/replica/${key}`)).status).toBe(200);
    expect(fs.existsSync(path.join(c.dataDir, 'hippocampus', 'hippocampus-2', 'dag', hashOf(n.cid)))).toBe(true);
  });

  it('fetches a node it lacks from its peer, and opens a shard-loss residue when no node has it', async () => {
    const n = apiNode('only on node one', await currentEpoch());
    expect((await call('PUT', `${c.urls.hippocampus}/dag`, n)).status).toBe(201);
    const key = `dag/${hashOf(n.cid)}`;
    expect((await get(c.urls.hippocampus2!, `/replica/${key}`)).status).toBe(404); // unpinned: not replicated
    // Read at its own epoch: unpinned, it is gated once the epoch is 3 past it.
    const read = await get(c.urls.hippocampus2!, `/dag/${encodeURIComponent(n.cid)}?epoch=${n.epoch}`);
    expect(read.status).toBe(200);
    expect(read.body.cid).toBe(n.cid);
    expect((await get(c.urls.hippocampus2!, `/replica/${key}`)).status).toBe(200); // kept (read repair)

    const lost = apiNode('to be lost', await currentEpoch());
    expect((await call('PUT', `${c.urls.hippocampus}/dag`, lost)).status).toBe(201);
    for (const h of ['hippocampus-1', 'hippocampus-2']) fs.rmSync(path.join(c.dataDir, 'hippocampus', h, 'dag', hashOf(lost.cid)), { force: true });
    // At its own epoch (gated, it would be a 410 before its payload is looked for).
    const gone = await get(c.urls.hippocampus!, `/dag/${encodeURIComponent(lost.cid)}?epoch=${lost.epoch}`);
    expect(gone.status).toBe(404);
    await expect
      .poll(
        async () => {
          const rs = (await get(c.gateway, `/v1/coordination/residues?kind=shard-loss&stackId=${encodeURIComponent(stackId)}`)).body as Array<{
            kind: string;
            trigger: string;
          }>;
          return rs.some((r) => r.kind === 'shard-loss' && r.trigger.includes(lost.cid));
        },
        { timeout: 10_000, interval: 300 },
      )
      .toBe(true);
  });

  it('two sleeve runtimes share the sleeves; one killed with -9 has its sleeves served by the others within two epochs', async () => {
    for (let i = 0; i < 6; i++) expect((await post(c.gateway, `/v1/sleeves/${encodeURIComponent(stackId)}`, { kind: 'ai', tickRate: 500 })).status).toBe(201);
    type Listed = { id: string; identityUrl: string | null };
    const alive = async () => (await get(c.gateway, '/v1/sleeves')).body as Listed[];
    const answers = async (s: Listed) =>
      !!s.identityUrl &&
      (await fetch(s.identityUrl, { signal: AbortSignal.timeout(2000) })
        .then(async (r) => r.ok && ((await r.json()) as { sleeveId: string }).sleeveId === s.id)
        .catch(() => false));
    // Both runtimes hold some: two identity listeners, every sleeve answering on its holder's.
    const portOf = (u: string) => new URL(u).port;
    await expect
      .poll(
        async () => {
          const all = await alive();
          return (await Promise.all(all.map(answers))).every(Boolean) && new Set(all.map((s) => portOf(s.identityUrl!))).size;
        },
        { timeout: 20_000, interval: 300 },
      )
      .toBe(2);
    const before = new Map((await alive()).map((s) => [s.id, s.identityUrl!]));
    process.kill(c.pidOf('sleeve-runtime-1')!, 'SIGKILL');
    const t0 = Date.now();
    let down: string[] = [];
    // When each of the killed runtime's sleeves first answered again (the restarted process may
    // then take some back from the other: that later rebalance is not the handover measured).
    const back = new Map<string, number>();
    await expect
      .poll(
        async () => {
          const all = await alive();
          const ok = await Promise.all(all.map(answers));
          if (!down.length) down = all.filter((_, i) => !ok[i]).map((s) => s.id); // what the killed one held
          all.forEach((s, i) => ok[i] && down.includes(s.id) && !back.has(s.id) && back.set(s.id, Date.now() - t0));
          return back.size === down.length && ok.every(Boolean);
        },
        { timeout: 20_000, interval: 200 },
      )
      .toBe(true);
    const took = Math.max(...back.values());
    console.log(`sleeve-runtime-1 killed with -9: its ${down.length} sleeves answered elsewhere after ${took} ms`);
    expect(down.length).toBeGreaterThan(0);
    const now = new Map((await alive()).map((s) => [s.id, s.identityUrl!]));
    for (const id of down) expect(now.get(id), id).not.toBe(before.get(id));
    expect(took).toBeLessThanOrEqual(2 * 4000); // two epochs of COG_EPOCH_INTERVAL_MS
  }, 60_000);
});

registerE2eSuite(() => c, 'distributed');
registerSubscriptionSuite(() => c);
