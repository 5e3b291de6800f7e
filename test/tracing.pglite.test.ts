// OpenTelemetry on the embedded database (`npm start` with OTEL_EXPORTER_OTLP_ENDPOINT, PGlite):
// the statements the driver runs, the hot path's composed ones included, are client spans of the
// request that ran them, as node-postgres's are on PostgreSQL (test/tracing.test.ts), with the
// statement's text and none of its parameters. Port shift 39000: every port of the topology stays
// below the ephemeral range .ci/run sets (49152 up).
import { describe, expect, it } from 'vitest';
import { call } from './helpers/cluster.ts';
import { ancestorsIn, routeOf, SpanKinds, tracedSuite, type ReceivedSpan } from './helpers/otlp.ts';

const traced = tracedSuite({ mode: 'embedded', shift: 39000 });

const { SERVER, CLIENT } = SpanKinds;

/** The trace of the one request whose server span's route matches, once its statements' spans are in. */
async function traceOf(route: RegExp, done: (statements: ReceivedSpan[]) => boolean): Promise<{ root: ReceivedSpan; spans: ReceivedSpan[] }> {
  let found: { root: ReceivedSpan; spans: ReceivedSpan[] } | undefined;
  await expect
    .poll(
      () => {
        const root = traced.otlp.spans.find((s) => s.kind === SERVER && !s.parentSpanId && route.test(routeOf(s)));
        const spans = root ? traced.otlp.spans.filter((s) => s.traceId === root.traceId) : [];
        found = root && done(spans.filter((s) => s.name.startsWith('pglite.query:'))) ? { root, spans } : undefined;
        return found !== undefined;
      },
      { timeout: 30_000, interval: 250 },
    )
    .toBe(true);
  return found!;
}

describe('traces on PGlite', () => {
  it("a perceive's write and a recall's read and spend are spans of their requests, without their parameters", async () => {
    const stack = await call('POST', `${traced.c.gateway}/v1/stacks`, { name: 'traced-pglite' });
    expect(stack.status).toBe(201);
    const sleeve = await call('POST', `${traced.c.gateway}/v1/sleeves/${encodeURIComponent(stack.body.id)}`, { kind: 'human' });
    expect(sleeve.status).toBe(201);
    const secretText = 'a thought only the payload holds';
    const perceived = await call('POST', `${traced.c.gateway}/v1/sleeves/${encodeURIComponent(sleeve.body.id)}/perceive`, { input: secretText });
    expect(perceived.status).toBe(200);
    const recalled = await call('POST', `${traced.c.gateway}/v1/recall`, { stackId: stack.body.id, depth: 5 });
    expect(recalled.status).toBe(200);
    expect(recalled.body.fragments.map((f: { text: string }) => f.text)).toEqual([secretText]);

    const recall = await traceOf(
      /\/v1\/recall$/,
      (st) =>
        st.some((s) => String(s.attributes['db.statement']).includes('spend_lock')) &&
        st.some((s) => String(s.attributes['db.statement']).includes('"episodicHead"')),
    );
    const ancestors = ancestorsIn(recall.spans);
    const statements = recall.spans.filter((s) => s.name.startsWith('pglite.query:'));
    // The read (the stack, its payer and the walk) and the spend: the recall's two statements.
    expect(statements.map((s) => s.name).sort()).toEqual(['pglite.query:SELECT', 'pglite.query:WITH']);
    for (const s of statements) {
      expect(s.kind).toBe(CLIENT);
      expect(s.service).toBe('cog');
      expect(s.attributes['db.system']).toBe('postgresql');
      expect(ancestors(s).includes(recall.root), `${s.name} hangs under the recall's request`).toBe(true);
    }

    const perceive = await traceOf(/\/perceive$/, (st) => st.some((s) => String(s.attributes['db.statement']).includes('"MemoryNode"')));
    const all = [...statements, ...perceive.spans.filter((s) => s.name.startsWith('pglite.query:'))];
    // Parameters never reach a span: not the ids, not the text (sealed in the payload anyway).
    for (const s of all) {
      const values = JSON.stringify(s.attributes);
      for (const secret of [stack.body.id, sleeve.body.id, secretText, perceived.body.cid]) expect(values).not.toContain(secret);
    }
  }, 90_000);
});
