// Coalescing of identical subgraph queries (router/coalesce.ts). The unit part drives the coalescer
// over a recording data source (the subgraph is not what it is about); the platform part fires
// identical queries at a real gateway over PGlite and checks answers, fetch counts, database queries,
// and that a query sent after a write has answered always sees that write.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import { CoalescingDataSource, copyJson } from '../../router/coalesce.ts';
import { startGateway, gatewayCoalesceStats } from '../../router/service.ts';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import type { RunningService } from '../../lib/service.ts';

type Response = Awaited<ReturnType<GraphQLDataSource['process']>>;

/** A data source that records each call and answers when told to. */
function recorder() {
  const calls: Array<{ query: string; variables: unknown; answer: (r: Response) => void; fail: (e: Error) => void }> = [];
  const source: GraphQLDataSource = {
    process: (o) => new Promise<Response>((answer, fail) => calls.push({ query: o.request.query!, variables: o.request.variables, answer, fail })),
  };
  return { calls, source };
}
const req = (query: string, variables: Record<string, unknown> = {}) =>
  ({ request: { query, variables }, context: {} }) as unknown as GraphQLDataSourceProcessOptions;
const turn = () => new Promise((r) => setImmediate(r));

describe('CoalescingDataSource', () => {
  it('runs identical queries sent in one turn once, and gives each caller its own copy', async () => {
    const { calls, source } = recorder();
    const c = new CoalescingDataSource(source);
    const pending = [1, 2, 3].map(() => c.process(req('{ stacks { id tags } }')));
    await turn();
    expect(calls).toHaveLength(1);
    calls[0]!.answer({ data: { stacks: [{ id: 'a', tags: ['x'] }] } });
    const [a, b, d] = await Promise.all(pending);
    expect(a).toEqual(b);
    expect(b).toEqual(d);
    (a!.data as { stacks: Array<{ tags: string[] }> }).stacks[0]!.tags.push('changed');
    expect((b!.data as { stacks: Array<{ tags: string[] }> }).stacks[0]!.tags).toEqual(['x']);
    expect((d!.data as { stacks: Array<{ tags: string[] }> }).stacks[0]!.tags).toEqual(['x']);
    expect(c.stats).toEqual({ executed: 1, joined: 2 });
  });

  it('does not join a fetch that has already started: a later query runs anew', async () => {
    const { calls, source } = recorder();
    const c = new CoalescingDataSource(source);
    const first = c.process(req('{ stacks { id } }'));
    await turn();
    const second = c.process(req('{ stacks { id } }'));
    await turn();
    expect(calls).toHaveLength(2);
    calls[0]!.answer({ data: { stacks: [] } });
    calls[1]!.answer({ data: { stacks: [{ id: 'new' }] } });
    expect(await first).toEqual({ data: { stacks: [] } });
    expect(await second).toEqual({ data: { stacks: [{ id: 'new' }] } });
    expect(c.stats).toEqual({ executed: 2, joined: 0 });
  });

  it('never coalesces mutations, and keys on variables and operation name', async () => {
    const { calls, source } = recorder();
    const c = new CoalescingDataSource(source);
    const m = [1, 2].map(() => c.process(req('mutation { createStack(name: "x") { id } }')));
    const v = [
      c.process(req('query($n: Int) { stacks(first: $n) { id } }', { n: 1 })),
      c.process(req('query($n: Int) { stacks(first: $n) { id } }', { n: 2 })),
    ];
    const named = [
      c.process({
        request: { query: 'query A { stacks { id } } query B { sleeves { id } }', operationName: 'A' },
        context: {},
      } as unknown as GraphQLDataSourceProcessOptions),
      c.process({
        request: { query: 'query A { stacks { id } } query B { sleeves { id } }', operationName: 'B' },
        context: {},
      } as unknown as GraphQLDataSourceProcessOptions),
    ];
    await turn();
    expect(calls).toHaveLength(6);
    for (const call of calls) call.answer({ data: {} });
    await Promise.all([...m, ...v, ...named]);
    expect(c.stats.joined).toBe(0);
  });

  it('hands a failure to every caller that joined', async () => {
    const { calls, source } = recorder();
    const c = new CoalescingDataSource(source);
    const pending = [1, 2].map(() => c.process(req('{ stacks { id } }')));
    await turn();
    calls[0]!.fail(new Error('subgraph down'));
    for (const p of pending) await expect(p).rejects.toThrow('subgraph down');
  });

  it('copies graphql-js results (null-prototype objects) as plain JSON values', () => {
    const o = Object.assign(Object.create(null), { a: [Object.assign(Object.create(null), { b: 1 })], c: null, d: 'x' });
    const copy = copyJson(o);
    expect(copy).toEqual({ a: [{ b: 1 }], c: null, d: 'x' });
    expect(copy.a).not.toBe(o.a);
  });
});

describe('coalescing through the platform gateway', () => {
  let p: TestPlatform;
  let gw: RunningService;
  const QUERY = '{ stacks(first: 100) { id name sleeves { id } balances { compute } memory(first: 2) { cid } } }';
  const gql = async (query: string) => {
    const r = await fetch(`${gw.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { data: { stacks: Array<{ id: string; name: string; sleeves: unknown[] }> }; errors?: unknown };
    expect(body.errors).toBeUndefined();
    return body.data;
  };

  beforeAll(async () => {
    p = await testPlatform({ GATEWAY_PORT: '0', COG_RATE_LIMIT_PER_MIN: '0' });
    gw = await startGateway(p);
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${gw.url}/v1/stacks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: `c${i}` }),
      });
      expect(r.status).toBe(201);
    }
  });
  afterAll(async () => {
    await gw?.close();
    await p?.cleanup();
  });

  it('answers identical concurrent queries alike, with fewer subgraph fetches and database queries than one each', async () => {
    const alone = await gql(QUERY);
    const before = p.db.statementCount();
    const stats = gatewayCoalesceStats(gw).get('stacks')!;
    const joinedBefore = stats.joined;
    await gql(QUERY);
    const perQuery = p.db.statementCount() - before;

    // Requests join when the server reads them in one turn; the test shares its event loop with the
    // server, so batches go on until some have (they do within the first few).
    const start = p.db.statementCount();
    let sent = 0;
    for (let batch = 0; batch < 20 && stats.joined === joinedBefore; batch++) {
      const answers = await Promise.all(Array.from({ length: 30 }, () => gql(QUERY)));
      sent += answers.length;
      for (const a of answers) expect(a).toEqual(alone);
    }
    expect(alone.stacks).toHaveLength(5);
    expect(stats.joined).toBeGreaterThan(joinedBefore);
    expect(p.db.statementCount() - start).toBeLessThan(sent * perQuery);
  });

  it('a query sent after a write answered sees it, while identical queries keep coming', async () => {
    let running = true;
    const hammer = (async () => {
      while (running) await Promise.all(Array.from({ length: 8 }, () => gql(QUERY)));
    })();
    try {
      for (let i = 0; i < 10; i++) {
        const r = await fetch(`${gw.url}/v1/stacks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: `ryw${i}` }),
        });
        expect(r.status).toBe(201);
        const { id } = (await r.json()) as { id: string };
        const seen = await gql(QUERY);
        expect(seen.stacks.map((s) => s.id)).toContain(id);
      }
    } finally {
      running = false;
      await hammer;
    }
    expect(gatewayCoalesceStats(gw).get('stacks')!.joined).toBeGreaterThan(0);
  });

  it('COG_GRAPHQL_COALESCE=off runs every fetch', async () => {
    const off = await startGateway({ ...p, config: { ...p.config, graphqlCoalesce: false } });
    try {
      expect(gatewayCoalesceStats(off).size).toBe(0);
      const before = p.db.statementCount();
      await fetch(`${off.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: QUERY }) });
      const one = p.db.statementCount() - before;
      const start = p.db.statementCount();
      await Promise.all(
        Array.from({ length: 10 }, () =>
          fetch(`${off.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: QUERY }) }),
        ),
      );
      expect(p.db.statementCount() - start).toBe(10 * one);
    } finally {
      await off.close();
    }
  });
});
