// OpenTelemetry traces end to end (issue 17): the distributed platform (port shift 40000, a process
// per service on PostgreSQL and NATS) exports OTLP/HTTP to a receiver in the test. One perceive is
// one trace: the gateway's request at the root, the internal HTTP calls, the PostgreSQL queries,
// the event relay's publish and the consumers' handling, each under its parent.
import { describe, expect, it } from 'vitest';
import { call } from './helpers/cluster.ts';
import { ancestorsIn, routeOf, SpanKinds, tracedSuite, type ReceivedSpan } from './helpers/otlp.ts';
import WebSocket from 'ws';

// TEST_TRACING_MODE=embedded checks the same on one process (PostgreSQL and NATS still real).
const traced = tracedSuite({ mode: process.env.TEST_TRACING_MODE === 'embedded' ? 'embedded' : 'distributed', realAdapters: true, shift: 40000 });

const { SERVER, CLIENT, PRODUCER, CONSUMER } = SpanKinds;
const gatewayService = () => (traced.c.mode === 'distributed' ? 'cog-gateway' : 'cog');
const isPerceiveRequest = (s: ReceivedSpan) => s.kind === SERVER && /\/perceive/.test(routeOf(s));

describe('traces', () => {
  it('one perceive is one trace from the gateway to the database and through the bus', async () => {
    const stack = await call('POST', `${traced.c.gateway}/v1/stacks`, { name: 'traced' });
    expect(stack.status).toBe(201);
    const sleeve = await call('POST', `${traced.c.gateway}/v1/sleeves`, { stackId: stack.body.id, embodimentType: 'ai' });
    expect(sleeve.status).toBe(201);
    // A live /v1/events client: a gateway consumes the perceive event from the bus for it. In
    // distributed mode the second gateway, so the trace crosses processes through the bus (the
    // perceive itself calls no other process: its payload and its epoch check are in its statement).
    const streamOn = traced.c.mode === 'distributed' ? traced.c.gateway2 : traced.c.gateway;
    const ws = new WebSocket(`${streamOn.replace('http', 'ws')}/v1/events?subjects=cog.perceive.>`);
    const events: string[] = [];
    ws.on('message', (m) => events.push(String(m)));
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    try {
      const perceived = await call('POST', `${traced.c.gateway}/v1/sleeves/${encodeURIComponent(sleeve.body.id)}/perceive`, { input: 'traced thought' });
      expect(perceived.status).toBe(200);
      await expect.poll(() => events.some((e) => e.includes(perceived.body.cid)), { timeout: 20_000 }).toBe(true);

      let trace: ReceivedSpan[] = [];
      await expect
        .poll(
          () => {
            const root = traced.otlp.spans.find((s) => s.service === gatewayService() && isPerceiveRequest(s) && !s.parentSpanId);
            trace = root ? traced.otlp.spans.filter((s) => s.traceId === root.traceId) : [];
            // Complete: the consumer's span, and every span's parent (each process exports on its own).
            const ids = new Set(trace.map((s) => s.spanId));
            // Distributed: the consumer's span is the other gateway's (another process).
            return (
              trace.some((s) => s.kind === CONSUMER && s.name === 'process cog.perceive') &&
              trace.every((s) => !s.parentSpanId || ids.has(s.parentSpanId)) &&
              (traced.c.mode !== 'distributed' || new Set(trace.map((s) => s.instance)).size >= 2)
            );
          },
          { timeout: 30_000, interval: 500 },
        )
        .toBe(true);
      const byId = new Map(trace.map((s) => [s.spanId, s]));
      // One root, the gateway's request; every other span hangs under a span of the same trace.
      const roots = trace.filter((s) => !s.parentSpanId);
      expect(roots.map((s) => [s.service, s.kind])).toEqual([[gatewayService(), SERVER]]);
      for (const s of trace) if (s.parentSpanId) expect(byId.has(s.parentSpanId), `${s.service} ${s.name} has its parent in the trace`).toBe(true);
      const ancestors = ancestorsIn(trace);
      // The database: PostgreSQL queries (pg), the write's one statement inside its commit span.
      const pg = trace.filter((s) => s.attributes['db.system'] === 'postgresql' || s.attributes['db.system.name'] === 'postgresql');
      expect(pg.length).toBeGreaterThan(0);
      const commit = trace.find((s) => s.name === 'commit memory writes');
      expect(commit).toBeDefined();
      expect(pg.some((s) => ancestors(s).includes(commit!))).toBe(true);
      // Distributed: the write's spans come from more than the gateway that took it (the other
      // gateway consumes its event). A perceive makes no internal HTTP call of its own, so the HTTP
      // hop is checked on the GraphQL query below, whose subgraph fetches always are.
      if (traced.c.mode === 'distributed') {
        const root = roots[0]!;
        expect(new Set(trace.map((s) => s.instance)).size).toBeGreaterThanOrEqual(2);
        const consumer = trace.find((s) => s.kind === CONSUMER && s.name === 'process cog.perceive' && s.instance !== root.instance);
        expect(consumer?.service).toBe(gatewayService());
      }
      // The bus: the relay's publish sits under the write's commit, the consumer under the publish.
      // Any process's relay may publish the row (two may race; the bus keeps one by its msgId).
      const publishes = trace.filter((s) => s.kind === PRODUCER && s.name === 'publish cog.perceive');
      expect(publishes.length).toBeGreaterThan(0);
      for (const pub of publishes) expect(ancestors(pub).some((a) => a.name === 'commit memory writes')).toBe(true);
      const consume = trace.find((s) => s.kind === CONSUMER && s.name === 'process cog.perceive')!;
      expect(publishes.map((s) => s.spanId)).toContain(consume.parentSpanId);
      // Nothing secret in a span: no bodies, no auth headers, no payload text.
      expect(JSON.stringify(trace)).not.toContain('traced thought');
      expect(JSON.stringify(trace).toLowerCase()).not.toContain('authorization');
    } finally {
      ws.close();
    }
  }, 90_000);

  it('a GraphQL query is one trace with the Apollo gateway spans (validate, plan, a fetch per subgraph)', async () => {
    const q = await call('POST', `${traced.c.gateway}/graphql`, {
      query: 'query TracedStacks { stacks(first: 2) { id name sleeves { id } } }',
      operationName: 'TracedStacks',
    });
    expect(q.status).toBe(200);
    let trace: ReceivedSpan[] = [];
    await expect
      .poll(
        () => {
          const req = traced.otlp.spans.find((s) => s.name === 'gateway.request' && s.service === gatewayService());
          trace = req ? traced.otlp.spans.filter((s) => s.traceId === req.traceId) : [];
          const ids = new Set(trace.map((s) => s.spanId));
          const names = new Set(trace.map((s) => s.name));
          // Complete: two fetches (stacks, then sleeves), the gateway's phases, every parent exported,
          // and distributed, both subgraphs' server spans (each process exports on its own).
          const servers = new Set(trace.filter((s) => s.kind === SERVER).map((s) => s.service));
          return (
            trace.filter((s) => s.name === 'gateway.fetch').length >= 2 &&
            (traced.c.mode !== 'distributed' || (servers.has('cog-subgraph-stacks') && servers.has('cog-subgraph-sleeves'))) &&
            ['gateway.request', 'gateway.validate', 'gateway.plan', 'gateway.execute'].every((n) => names.has(n)) &&
            trace.every((s) => !s.parentSpanId || ids.has(s.parentSpanId))
          );
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBe(true);
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    expect(trace.filter((s) => !s.parentSpanId).map((s) => s.kind)).toEqual([SERVER]);
    for (const name of ['gateway.request', 'gateway.validate', 'gateway.plan', 'gateway.execute']) expect(trace.map((s) => s.name)).toContain(name);
    for (const f of trace.filter((s) => s.name === 'gateway.fetch')) expect(byId.has(f.parentSpanId!)).toBe(true);
    const hops = trace.filter(
      (s) => s.kind === SERVER && s.parentSpanId && byId.get(s.parentSpanId)?.kind === CLIENT && byId.get(s.parentSpanId)!.service !== s.service,
    );
    // Distributed: each subgraph fetch is an internal HTTP hop, the gateway's client span the parent
    // of the subgraph's server span, with the subgraph's database queries under it.
    if (traced.c.mode === 'distributed') {
      expect(new Set(hops.map((s) => s.service))).toEqual(new Set(['cog-subgraph-stacks', 'cog-subgraph-sleeves']));
      for (const h of hops) expect(trace.some((s) => s.service === h.service && s.name.startsWith('pg.query'))).toBe(true);
    }
  }, 60_000);

  it('scrapes and probes are not traced', async () => {
    const before = traced.otlp.spans.length;
    for (const path of ['/healthz', '/readyz', '/metrics']) await fetch(`${traced.c.gateway}${path}`);
    await new Promise((r) => setTimeout(r, 1500));
    const urls = traced.otlp.spans.slice(before).map((s) => String(s.attributes['url.path'] ?? ''));
    expect(urls.filter((u) => /^\/(healthz|readyz|metrics)/.test(u))).toEqual([]);
  }, 30_000);
});
