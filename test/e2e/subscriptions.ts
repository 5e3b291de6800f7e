// Every GraphQL subscription field receiving live events from a running platform (a Cluster:
// `cog start` or `cog up --distributed`), driven over the network only: graphql-ws on /graphql
// for the subscriptions, the /v1 REST routes to cause the events. Registered by
// test/e2e/embedded.test.ts and test/distributed.test.ts, so each field is proven on the
// in-process bus and on NATS JetStream.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { createClient, type Client } from 'graphql-ws';
import { call, type Cluster } from '../helpers/cluster.ts';

type Data = Record<string, any>;

/**
 * A live subscription: `got` fills as payloads arrive; `until(pred)` resolves with the first that
 * matches (looking at those already received too) or rejects after `timeoutMs`, naming what came.
 * `ready` resolves a little after the subscribe message went out, for the server to open its bus
 * consumer before the test causes the event.
 */
function subscribe(client: Client, query: string, variables: Data = {}) {
  const got: Data[] = [];
  let failure: Error | undefined;
  const stop = client.subscribe<Data>({ query, variables }, {
    next: (v) => {
      if (v.errors) failure = new Error(JSON.stringify(v.errors));
      else got.push(Object.values(v.data ?? {})[0] as Data);
    },
    error: (e) => (failure = e instanceof Error ? e : new Error(JSON.stringify(e))),
    complete: () => {},
  });
  const ready = new Promise<void>((r) => setTimeout(r, 600));
  const until = async (pred: (d: Data) => boolean, timeoutMs = 30_000): Promise<Data> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (failure) throw failure;
      const hit = got.find(pred);
      if (hit) return hit;
      if (Date.now() > deadline) throw new Error(`no matching event within ${timeoutMs} ms for ${query}; got ${JSON.stringify(got).slice(0, 800)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  return { got, ready, until, stop };
}

export function registerSubscriptionSuite(get: () => Cluster): void {
  describe('GraphQL subscriptions on a running platform', () => {
    let c: Cluster;
    let client: Client;
    let stackId = '';
    let sleeveId = '';
    const post = (path: string, body?: unknown) => call('POST', `${c.gateway}${path}`, body ?? {});

    beforeAll(async () => {
      c = get();
      client = createClient({ url: `${c.gateway.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, retryAttempts: 0, lazy: false });
      const s = await post('/v1/stacks', { name: `subs-${randomBytes(3).toString('hex')}` });
      expect(s.status).toBe(201);
      stackId = s.body.id;
    });
    afterAll(async () => {
      await client?.dispose();
    });

    it('sleeveChanged(stackId): a spawn through REST arrives with the sleeve resolved through the gateway', async () => {
      const sub = subscribe(client, 'subscription($s: ID!) { sleeveChanged(stackId: $s) { cursor type stackId sleeveId sleeve { id embodimentType alive } } }', { s: stackId });
      await sub.ready;
      const sl = await post('/v1/sleeves', { stackId, embodimentType: 'ai' });
      expect(sl.status).toBe(201);
      sleeveId = sl.body.id;
      const ev = await sub.until((d) => d.type === 'sleeve.spawned');
      sub.stop();
      expect(ev).toMatchObject({ type: 'sleeve.spawned', stackId, sleeveId, sleeve: { id: sleeveId, embodimentType: 'ai', alive: true } });
      expect(ev.cursor).toMatch(/^\d+$/);
    });

    it('perceived(stackId): the perceive arrives with its memory node', async () => {
      const sub = subscribe(client, 'subscription($s: ID!) { perceived(stackId: $s) { cursor stackId sleeveId cid epoch node { cid } stack { id } } }', { s: stackId });
      await sub.ready;
      const r = await post(`/v1/sleeves/${sleeveId}/perceive`, { input: 'seen by a subscriber' });
      expect(r.status).toBe(200);
      const ev = await sub.until((d) => d.cid === r.body.cid);
      sub.stop();
      expect(ev).toMatchObject({ stackId, sleeveId, node: { cid: r.body.cid }, stack: { id: stackId } });
    });

    it('blockMined and epochAdvanced: a block mined through REST arrives on both', async () => {
      const blocks = subscribe(client, 'subscription { blockMined { cursor height blockHash epoch } }');
      const epochs = subscribe(client, 'subscription { epochAdvanced { cursor epoch height tip } }');
      await Promise.all([blocks.ready, epochs.ready]);
      const m = await post('/v1/mining/block');
      expect(m.status, JSON.stringify(m.body)).toBe(200);
      const b = await blocks.until((d) => d.blockHash === m.body.blockHash, 60_000);
      expect(b).toMatchObject({ height: m.body.height, epoch: m.body.epoch });
      const e = await epochs.until((d) => d.tip === m.body.blockHash, 60_000);
      expect(e).toMatchObject({ epoch: m.body.epoch, height: m.body.height });
      blocks.stop();
      epochs.stop();
    }, 90_000);

    it('emission(stackId): the Treasury emission for the stack arrives after an epoch', async () => {
      const sub = subscribe(client, 'subscription($s: ID!) { emission(stackId: $s) { cursor stackId epoch ebcFactor stack { id } } }', { s: stackId });
      await sub.ready;
      expect((await post('/v1/mining/block')).status).toBe(200);
      const ev = await sub.until(() => true, 60_000);
      sub.stop();
      expect(ev).toMatchObject({ stackId, stack: { id: stackId } });
      expect(ev.epoch).toBeGreaterThan(0);
      expect(ev.ebcFactor).toBeGreaterThan(0);
    }, 90_000);

    it('needlecastProgress(sagaId): every step of a needlecast, then the saga completing', async () => {
      const target = await post('/v1/sleeves', { stackId, embodimentType: 'human' });
      expect(target.status).toBe(201);
      const sagaId = `needle:${randomBytes(16).toString('hex')}`;
      const sub = subscribe(client, 'subscription($id: ID!) { needlecastProgress(sagaId: $id) { cursor sagaId step status saga { id status } } }', { id: sagaId });
      await sub.ready;
      const n = await post('/v1/needlecast', { from: sleeveId, to: target.body.id, sagaId });
      expect(n.status, JSON.stringify(n.body)).toBe(200);
      expect(n.body).toMatchObject({ ok: true, sagaId });
      const last = await sub.until((d) => d.step === 'saga', 60_000);
      sub.stop();
      expect(last).toMatchObject({ status: 'completed', saga: { id: sagaId, status: 'completed' } });
      expect(sub.got.every((d) => d.sagaId === sagaId)).toBe(true);
      expect(sub.got.filter((d) => d.status === 'done').map((d) => d.step)).toEqual(['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle']);
      sleeveId = target.body.id;
    }, 90_000);

    it('residueOpened and residueChanged(id): a low-fidelity recall opens a residue, seen live and again on resume', async () => {
      // Unpinned nodes are readable within 2 epochs of theirs: perceive, move 3 epochs on, recall.
      for (let i = 0; i < 3; i++) expect((await post(`/v1/sleeves/${sleeveId}/perceive`, { input: `fading ${i}` })).status).toBe(200);
      const opened = subscribe(client, 'subscription { residueOpened { cursor residueId kind status residue { id stackId } } }');
      await opened.ready;
      for (let i = 0; i < 3; i++) expect((await post('/v1/mining/block')).status).toBe(200);
      const r = await call('GET', `${c.gateway}/v1/stacks/${stackId}/recall?depth=10`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.fidelity, JSON.stringify(r.body)).toBeLessThan(0.6);
      const ev = await opened.until((d) => d.kind === 'historical-non-canonical' && d.residue?.stackId === stackId, 60_000);
      opened.stop();
      expect(ev).toMatchObject({ status: 'open', residue: { id: ev.residueId, stackId } });
      // Resumed from the start of the stream, filtered to that residue: its opening is replayed.
      const changed = subscribe(client, 'subscription($id: ID, $after: String) { residueChanged(id: $id, after: $after) { cursor residueId kind status } }', { id: ev.residueId, after: '0' });
      const again = await changed.until(() => true);
      changed.stop();
      expect(again).toMatchObject({ residueId: ev.residueId, kind: 'historical-non-canonical', status: 'open', cursor: ev.cursor });
    }, 120_000);
  });
}
