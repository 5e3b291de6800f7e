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
  const stop = client.subscribe<Data>(
    { query, variables },
    {
      next: (v) => {
        if (v.errors) failure = new Error(JSON.stringify(v.errors));
        else got.push(Object.values(v.data ?? {})[0] as Data);
      },
      error: (e) => (failure = e instanceof Error ? e : new Error(JSON.stringify(e))),
      complete: () => {},
    },
  );
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

/**
 * Causes events (`cause`, at most `attempts` times) until `sub` has one that `matches` a caused one,
 * and returns it with what caused it. A subscription's bus consumer starts at the stream's end when
 * the server handles the subscribe message; `ready` waits a moment for that, but on a loaded machine
 * the moment can be longer and an event caused before it is never delivered, so the cause is
 * repeated. What arrives must still be one of the events caused here.
 */
async function causeUntilSeen<T>(
  sub: ReturnType<typeof subscribe>,
  cause: () => Promise<T>,
  matches: (d: Data, caused: T) => boolean,
  attempts = 3,
  perAttemptMs = 15_000,
): Promise<{ event: Data; caused: T; all: T[] }> {
  const all: T[] = [];
  const hit = () => {
    for (const d of sub.got) for (const t of all) if (matches(d, t)) return { event: d, caused: t };
    return undefined;
  };
  for (let i = 0; i < attempts; i++) {
    all.push(await cause());
    const found = await sub
      .until((d) => all.some((t) => matches(d, t)), perAttemptMs)
      .then(hit, (e: Error) => {
        if (i === attempts - 1) throw e;
        return undefined;
      });
    if (found) return { ...found, all };
  }
  throw new Error('unreachable');
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
      const sub = subscribe(
        client,
        'subscription($s: ID!) { sleeveChanged(stackId: $s) { cursor type stackId sleeveId sleeve { id embodimentType alive } } }',
        { s: stackId },
      );
      await sub.ready;
      const { event: ev, caused } = await causeUntilSeen(
        sub,
        async () => {
          const sl = await post('/v1/sleeves', { stackId, embodimentType: 'ai' });
          expect(sl.status).toBe(201);
          return sl.body.id as string;
        },
        (d, id) => d.type === 'sleeve.spawned' && d.sleeveId === id,
      );
      sub.stop();
      sleeveId = caused;
      expect(ev).toMatchObject({ type: 'sleeve.spawned', stackId, sleeveId, sleeve: { id: sleeveId, embodimentType: 'ai', alive: true } });
      expect(ev.cursor).toMatch(/^\d+$/);
    }, 120_000);

    it('perceived(stackId): the perceive arrives with its memory node', async () => {
      const sub = subscribe(client, 'subscription($s: ID!) { perceived(stackId: $s) { cursor stackId sleeveId cid epoch node { cid } stack { id } } }', {
        s: stackId,
      });
      await sub.ready;
      // At most 3 perceives: the needlecast below pins them, and the residue test's recall must
      // still find fewer than 60% of the stack's nodes readable.
      const { event: ev, caused: cid } = await causeUntilSeen(
        sub,
        async () => {
          const r = await post(`/v1/sleeves/${sleeveId}/perceive`, { input: 'seen by a subscriber' });
          expect(r.status).toBe(200);
          return r.body.cid as string;
        },
        (d, c) => d.cid === c,
        3,
      );
      sub.stop();
      expect(ev).toMatchObject({ stackId, sleeveId, cid, node: { cid }, stack: { id: stackId } });
    }, 120_000);

    it('blockMined and epochAdvanced: a block mined through REST arrives on both', async () => {
      const blocks = subscribe(client, 'subscription { blockMined { cursor height blockHash epoch } }');
      const epochs = subscribe(client, 'subscription { epochAdvanced { cursor epoch height tip } }');
      await Promise.all([blocks.ready, epochs.ready]);
      // Mined until both subscriptions deliver one same block mined here (see causeUntilSeen).
      const mined: Array<{ blockHash: string; height: number; epoch: number }> = [];
      const seen = () => mined.find((x) => blocks.got.some((d) => d.blockHash === x.blockHash) && epochs.got.some((d) => d.tip === x.blockHash));
      for (let i = 0; i < 3 && !seen(); i++) {
        const m = await post('/v1/mining/block');
        expect(m.status, JSON.stringify(m.body)).toBe(200);
        mined.push(m.body);
        await blocks
          .until(() => !!seen(), 20_000)
          .catch((err: Error) => {
            if (i === 2) throw new Error(`${err.message}; epochAdvanced got ${JSON.stringify(epochs.got).slice(0, 800)}`);
          });
      }
      const m = seen()!;
      expect(blocks.got.find((d) => d.blockHash === m.blockHash)).toMatchObject({ height: m.height, epoch: m.epoch });
      expect(epochs.got.find((d) => d.tip === m.blockHash)).toMatchObject({ epoch: m.epoch, height: m.height });
      blocks.stop();
      epochs.stop();
    }, 150_000);

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
      const sub = subscribe(client, 'subscription($id: ID!) { needlecastProgress(sagaId: $id) { cursor sagaId step status saga { id status } } }', {
        id: sagaId,
      });
      await sub.ready;
      const n = await post('/v1/needlecast', { from: sleeveId, to: target.body.id, sagaId });
      expect(n.status, JSON.stringify(n.body)).toBe(200);
      expect(n.body).toMatchObject({ ok: true, sagaId });
      const last = await sub.until((d) => d.step === 'saga', 60_000);
      sub.stop();
      expect(last).toMatchObject({ status: 'completed', saga: { id: sagaId, status: 'completed' } });
      expect(sub.got.every((d) => d.sagaId === sagaId)).toBe(true);
      const progress = ['start:running', ...['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle'].map((s) => `${s}:done`), 'saga:completed'];
      // Live: in order and without a gap from the first event delivered on. The saga starts at once,
      // and on a loaded machine the subscription's bus consumer may open after its first steps.
      const live = sub.got.map((d) => `${d.step}:${d.status}`);
      expect(live).toEqual(progress.slice(progress.length - live.length));
      // Resumed from the start of the stream: every step, in order.
      const replay = subscribe(client, 'subscription($id: ID!) { needlecastProgress(sagaId: $id, after: "0") { cursor sagaId step status } }', { id: sagaId });
      await replay.until((d) => d.step === 'saga', 60_000);
      replay.stop();
      expect(replay.got.map((d) => `${d.step}:${d.status}`)).toEqual(progress);
      expect(replay.got.slice(-live.length).map((d) => d.cursor)).toEqual(sub.got.map((d) => d.cursor));
      sleeveId = target.body.id;
    }, 150_000);

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
      const changed = subscribe(client, 'subscription($id: ID, $after: String) { residueChanged(id: $id, after: $after) { cursor residueId kind status } }', {
        id: ev.residueId,
        after: '0',
      });
      const again = await changed.until(() => true);
      changed.stop();
      expect(again).toMatchObject({ residueId: ev.residueId, kind: 'historical-non-canonical', status: 'open', cursor: ev.cursor });
    }, 120_000);
  });
}
