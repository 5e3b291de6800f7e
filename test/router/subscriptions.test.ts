import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import WebSocket from 'ws';
import { buildClientSchema, getIntrospectionQuery, parse, validate } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { startGateway } from '../../router/service.ts';
import type { RunningService } from '../../lib/service.ts';
import { metricsText } from '../../lib/metrics.ts';
import { parseProm, sum } from '../helpers/prom.ts';

let p: TestPlatform;
let gw: RunningService;
let wsUrl: string;

beforeAll(async () => {
  p = await testPlatform({ GATEWAY_PORT: '0' });
  gw = await startGateway(p);
  wsUrl = gw.url!.replace('http', 'ws');
  await p.db.prisma.stack.create({
    data: {
      id: 'stack:human:1:aaaaaaaaaaaa',
      name: 'Ada',
      kind: 'human',
      shape: 'A',
      pubKey: 'ab'.repeat(32),
      syncCoeff: 1,
      memoryCoeff: 1,
      computeCoeff: 1,
      residueCoeff: 1,
      routingCoeff: 1,
      masterSecret: 'sealed',
    },
  });
});
afterAll(async () => {
  await gw?.close();
  await p?.cleanup();
});

function client(): Client {
  return createClient({ url: `${wsUrl}/graphql`, webSocketImpl: WebSocket, lazy: true, retryAttempts: 0 });
}

/**
 * Resolves once the router has opened its next bus consumer on `subject`. A new subscription's
 * consumer starts at the end of the stream, so only events published after this reach it; a fixed
 * pause after the connection can end first on a loaded machine (the server shares this process).
 */
function consumerOpened(subject: string): Promise<void> {
  const bus = p.bus;
  const original = bus.subscribe;
  return new Promise<void>((resolve) => {
    bus.subscribe = async function (this: typeof bus, ...args: Parameters<typeof original>) {
      const sub = await original.apply(this, args);
      if (args[0].subjects.includes(subject)) {
        bus.subscribe = original;
        resolve();
      }
      return sub;
    };
  });
}

/** Collects `n` results of a subscription; `ready` once its bus consumer on `subject` is open. */
function take<T>(c: Client, query: string, n: number, subject: string): { done: Promise<T[]>; ready: Promise<void> } {
  const got: T[] = [];
  const readyP = consumerOpened(subject);
  const done = new Promise<T[]>((resolve, reject) => {
    const stop = c.subscribe<T>(
      { query },
      {
        next: (v) => {
          got.push(v.data as T);
          if (got.length === n) {
            stop();
            resolve(got);
          }
        },
        error: reject,
        complete: () => resolve(got),
      },
    );
  });
  return { done, ready: readyP };
}

describe('GraphQL subscriptions through the router', () => {
  it('epochAdvanced streams bus events with cursors, and resumes after a cursor without gaps', async () => {
    const c = client();
    const sub = take<{ epochAdvanced: { cursor: string; epoch: number } }>(
      c,
      'subscription { epochAdvanced { cursor epoch height tip } }',
      3,
      'cog.epoch.advanced',
    );
    await sub.ready;
    // Metrics by subscription field: one running, one more started.
    const during = parseProm(await metricsText());
    expect(sum(during, 'cog_graphql_subscriptions_active', { subscription: 'epochAdvanced' })).toBe(1);
    expect(sum(during, 'cog_graphql_subscriptions_total', { subscription: 'epochAdvanced' })).toBeGreaterThanOrEqual(1);
    for (const e of [1, 2, 3]) await p.bus.publish('cog.epoch.advanced', { type: 'epoch.advanced', ts: Date.now(), epoch: e, height: e, tip: 'ab'.repeat(32) });
    const events = await sub.done;
    expect(events.map((e) => e.epochAdvanced.epoch)).toEqual([1, 2, 3]);
    const first = events[0].epochAdvanced.cursor;
    const resumed = take<{ epochAdvanced: { epoch: number } }>(c, `subscription { epochAdvanced(after: "${first}") { epoch } }`, 2, 'cog.epoch.advanced');
    expect((await resumed.done).map((e) => e.epochAdvanced.epoch)).toEqual([2, 3]);
    await c.dispose();
    await expect
      .poll(async () => sum(parseProm(await metricsText()), 'cog_graphql_subscriptions_active', { subscription: 'epochAdvanced' }), { timeout: 5000 })
      .toBe(0);
  });

  it('perceived(stackId) filters by stack and resolves entity fields through the gateway', async () => {
    const c = client();
    const sub = take<{ perceived: { cid: string; stack: { name: string; tokenId: number } } }>(
      c,
      'subscription { perceived(stackId: "stack:human:1:aaaaaaaaaaaa") { cid epoch stack { name tokenId } } }',
      1,
      'cog.perceive.stack:human:1:aaaaaaaaaaaa',
    );
    await sub.ready;
    await p.bus.publish('cog.perceive.stack:other', { type: 'perceive', stackId: 'stack:other', sleeveId: 's', cid: 'cog://x@1', epoch: 1 });
    await p.bus.publish('cog.perceive.stack:human:1:aaaaaaaaaaaa', {
      type: 'perceive',
      stackId: 'stack:human:1:aaaaaaaaaaaa',
      sleeveId: 's',
      cid: 'cog://y@1',
      epoch: 1,
    });
    const [ev] = await sub.done;
    expect(ev.perceived.cid).toBe('cog://y@1');
    expect(ev.perceived.stack).toEqual({ name: 'Ada', tokenId: expect.any(Number) });
    await c.dispose();
  });

  it('refuses a cursor that is not one (it would start live, past what the client missed)', async () => {
    const c = client();
    const err = await new Promise<unknown>((resolve, reject) => {
      c.subscribe(
        { query: 'subscription { epochAdvanced(after: "garbage") { epoch } }' },
        { next: (v) => (v.errors ? resolve(v.errors) : reject(new Error('an event'))), error: resolve, complete: () => {} },
      );
    });
    expect(JSON.stringify(err)).toContain('BAD_USER_INPUT');
    await c.dispose();
  });

  it('queries work over the socket too', async () => {
    const c = client();
    const r = await new Promise<unknown>((resolve, reject) => {
      c.subscribe({ query: '{ stacksHealth { ok name } }' }, { next: (v) => resolve(v.data), error: reject, complete: () => {} });
    });
    expect(r).toEqual({ stacksHealth: { ok: true, name: 'stacks' } });
    await c.dispose();
  });

  it('introspection over HTTP shows the Subscription type the socket serves (GraphiQL and codegen see it)', async () => {
    const post = async (body: unknown, accept?: string) => {
      const r = await fetch(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(accept ? { accept } : {}) },
        body: JSON.stringify(body),
      });
      return { status: r.status, type: r.headers.get('content-type'), body: (await r.json()) as { data?: any; errors?: { message: string }[] } };
    };
    const full = await post({ query: getIntrospectionQuery(), operationName: 'IntrospectionQuery' });
    expect(full.status, JSON.stringify(full.body.errors)).toBe(200);
    const schema = buildClientSchema(full.body.data);
    expect(schema.getQueryType()?.getFields()).toHaveProperty('stacks');
    expect(schema.getMutationType()?.getFields()).toHaveProperty('perceive');
    const subs = schema.getSubscriptionType()?.getFields() ?? {};
    for (const f of ['epochAdvanced', 'blockMined', 'residueOpened', 'residueChanged', 'perceived', 'sleeveChanged', 'needlecastProgress', 'emission'])
      expect(subs, f).toHaveProperty(f);
    // A subscription written against it validates.
    expect(validate(schema, parse('subscription { perceived(stackId: "s") { cid node { cid } } }'))).toEqual([]);
    const one = await post({ query: '{ __type(name: "PerceiveEvent") { fields { name } } }' }, 'application/graphql-response+json');
    expect(one.type).toContain('application/graphql-response+json');
    expect(one.body.data.__type.fields.map((f: { name: string }) => f.name)).toContain('cursor');
    // A subscription sent over HTTP is told where subscriptions are served.
    const overHttp = await post({ query: 'subscription { epochAdvanced { epoch } }' });
    expect(overHttp.status).toBe(400);
    expect(overHttp.body.errors?.[0]?.message).toMatch(/WebSocket/);
    // Mixed with a real field it is an ordinary query (the gateway answers it).
    const mixed = await post({ query: '{ __schema { subscriptionType { name } } stacksHealth { ok } }' });
    expect(mixed.body.data?.stacksHealth).toEqual({ ok: true });
    // Limits still apply; a bad introspection query is a 400 with errors.
    expect((await post({ query: '{ __type(name: 1) { name } }' })).status).toBe(400);
    // Introspection is exempt from the depth limit (the standard query is 15 deep) but not from its
    // own: list fields nested past the standard query's three multiply the answer, and are refused.
    const fan = await post({ query: '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }' });
    expect(fan.status).toBe(400);
    expect(JSON.stringify(fan.body.errors)).toContain('INTROSPECTION_TOO_DEEP');
    const aliases = await post({ query: `{ __schema { ${Array.from({ length: 40 }, (_, i) => `a${i}: types { name }`).join(' ')} } }` });
    expect(JSON.stringify(aliases.body.errors)).toContain('TOO_MANY_ALIASES');
  });

  it('a WebSocket upgrade to an unknown path is answered with a 404, not dropped', async () => {
    const ws = new WebSocket(`${wsUrl}/nowhere`);
    const status = await new Promise<number>((resolve, reject) => {
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => reject(new Error('opened')));
      ws.on('error', () => {});
    });
    expect(status).toBe(404);
  });

  it('closes with 4408 when the client never sends connection_init', async () => {
    const ws = new WebSocket(`${wsUrl}/graphql`, 'graphql-transport-ws');
    const code = await new Promise<number>((r) => ws.on('close', (c) => r(c)));
    expect(code).toBe(4408);
  }, 10_000);

  it('closes with 4401 on subscribe before ack, 4409 on a duplicate id', async () => {
    const early = new WebSocket(`${wsUrl}/graphql`, 'graphql-transport-ws');
    await new Promise((r) => early.on('open', r));
    early.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: 'subscription { epochAdvanced { epoch } }' } }));
    expect(await new Promise<number>((r) => early.on('close', (c) => r(c)))).toBe(4401);

    const dup = new WebSocket(`${wsUrl}/graphql`, 'graphql-transport-ws');
    await new Promise((r) => dup.on('open', r));
    dup.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((r) => dup.once('message', r));
    const msg = { id: 'a', type: 'subscribe', payload: { query: 'subscription { epochAdvanced { epoch } }' } };
    dup.send(JSON.stringify(msg));
    dup.send(JSON.stringify(msg));
    expect(await new Promise<number>((r) => dup.on('close', (c) => r(c)))).toBe(4409);
  });
});

describe('REST event stream /v1/events', () => {
  it('streams {subject, type, ts, data} filtered by subjects, and resumes with since', async () => {
    const ws = new WebSocket(`${wsUrl}/v1/events?subjects=cog.residue.*`);
    const msgs: { subject: string; type: string; ts: number; data: Record<string, unknown>; seq: number }[] = [];
    const ready = new Promise<void>((r) =>
      ws.on('message', (m) => {
        const v = JSON.parse(String(m));
        if (v.subject === 'cog.stream.ready') r();
        else msgs.push(v);
      }),
    );
    await ready;
    await p.bus.publish('cog.epoch.advanced', { type: 'epoch.advanced', epoch: 9 });
    await p.bus.publish('cog.residue.opened', { type: 'residue.opened', ts: 1, residue: { id: 'r1' } });
    await p.bus.publish('cog.residue.changed', { type: 'residue.changed', ts: 2, residue: { id: 'r1' } });
    await expect.poll(() => msgs.length).toBe(2);
    expect(msgs.map((m) => m.subject)).toEqual(['cog.residue.opened', 'cog.residue.changed']);
    expect(msgs[0]).toMatchObject({ type: 'residue.opened', data: { residue: { id: 'r1' } } });
    ws.close();

    const again = new WebSocket(`${wsUrl}/v1/events?subjects=cog.residue.*&since=${msgs[0].seq}`);
    const replay: string[] = [];
    await new Promise<void>((r) =>
      again.on('message', (m) => {
        const v = JSON.parse(String(m));
        if (v.subject !== 'cog.stream.ready') replay.push(v.subject);
        if (replay.length === 1) r();
      }),
    );
    expect(replay).toEqual(['cog.residue.changed']);
    again.close();
  });

  it('refuses a malformed subject filter or since with a 400 problem at the upgrade, never a server close', async () => {
    const refused = async (query: string) => {
      const ws = new WebSocket(`${wsUrl}/v1/events?${query}`);
      ws.on('error', () => {});
      return new Promise<{ status: number; body: string }>((resolve, reject) => {
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.on('open', () => reject(new Error(`${query} opened`)));
      });
    };
    for (const f of ['bad subject!', 'foo.bar', '*', '>', 'cog', 'cog..perceive', 'cog.>.x', 'cog.perceive.', 'x'.repeat(300)]) {
      const r = await refused(`subjects=${encodeURIComponent(f)}`);
      expect(r.status, f).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    }
    for (const since of ['abc', '-5', '1.5', '']) expect((await refused(`subjects=cog.>&since=${since}`)).status, since).toBe(400);
    // What the filters allow opens.
    const ok = new WebSocket(`${wsUrl}/v1/events?subjects=${encodeURIComponent('cog.perceive.*,cog.epoch.advanced,cog.>')}&since=0`);
    const first = await new Promise<{ subject: string }>((resolve, reject) => {
      ok.on('message', (m) => resolve(JSON.parse(String(m))));
      ok.on('close', (code) => reject(new Error(`closed ${code}`)));
    });
    expect(first.subject).toBeTruthy();
    ok.close();
  });
});
