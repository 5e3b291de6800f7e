// OpenTelemetry traces. Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then `startTracing` (called
// by bin/cog.mjs before any other module loads, so the instrumentations can hook http, undici, pg,
// fastify and Prisma) exports spans over OTLP/HTTP. The helpers below use only the API, which is a
// no-op without a registered provider, so the kernel calls them unconditionally.
//
// The trace context crosses every internal HTTP call (the undici and http instrumentations inject
// and read `traceparent`) and every bus message: an outbox row keeps the `traceparent` of the
// transaction that wrote it, the relay publishes under it, and a consumer handles the message in
// a span whose parent is the publish.
import { randomUUID } from 'node:crypto';
import { commonJsExports } from './commonjs.ts';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context } from '@opentelemetry/api';

const tracer = () => trace.getTracer('cog');

/** The active trace context as a W3C `traceparent` header value, or undefined outside a trace. */
export function currentTraceparent(ctx: Context = context.active()): string | undefined {
  if (!trace.getSpanContext(ctx)) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

const parentFrom = (traceparent: string | undefined): Context => (traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent }) : context.active());

/**
 * Runs `fn` in a span named `name` whose parent is the remote `traceparent` (a message's), or the
 * active context when there is none. Errors mark the span and are rethrown.
 */
export async function inSpan<T>(
  name: string,
  opts: { kind?: SpanKind; traceparent?: string; attributes?: Record<string, string | number | boolean> },
  fn: () => Promise<T> | T,
): Promise<T> {
  const parent = parentFrom(opts.traceparent);
  // Without a parent trace and without a provider this costs one no-op span.
  return tracer().startActiveSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes }, parent, async (span) => {
    try {
      return await fn();
    } catch (e) {
      span.recordException(e as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (e as Error).message?.slice(0, 200) });
      throw e;
    } finally {
      span.end();
    }
  });
}

export { SpanKind };

/**
 * A statement PGlite runs, in a client span of the active trace: the pg instrumentation sees only
 * node-postgres, so on the embedded database the hot path's statements (a perceive's write, a
 * recall's read and spend) were missing from a request's trace. Named and described as pg's spans
 * are (`pglite.query:WITH`, db.system, db.statement), with the statement's text and never its
 * parameters. A statement outside a sampled trace (a background loop's) records nothing.
 */
export function inDbSpan<T>(text: string, fn: () => Promise<T>): Promise<T> {
  const verb = /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() ?? 'QUERY';
  return inSpan(`pglite.query:${verb}`, { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql', 'db.name': 'pglite', 'db.statement': text } }, fn);
}

/** Runs `fn` outside any trace: background work nudged from a request must not join its trace. */
export const untraced = <T>(fn: () => T): T => context.with(ROOT_CONTEXT, fn);

export interface TracingOptions {
  /** OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`); traces go to `<endpoint>/v1/traces`. */
  endpoint: string;
  /** `service.name` of this process (`cog` embedded, `cog-<service>` distributed). */
  serviceName: string;
}

/**
 * Registers the tracer provider and the instrumentations. Loaded only when tracing is on (the SDK
 * costs start time otherwise). Returns a flush-and-stop for shutdown.
 */
export async function startTracing(opts: TracingOptions): Promise<{ shutdown(): Promise<void> }> {
  // Some are bundled into the precompiled platform, some not: each read as lib/commonjs.ts says.
  const [
    { NodeTracerProvider, BatchSpanProcessor, ParentBasedSampler, SamplingDecision },
    { OTLPTraceExporter },
    { resourceFromAttributes },
    { registerInstrumentations },
  ] = await Promise.all([
    import('@opentelemetry/sdk-trace-node').then((m) => commonJsExports(m, 'NodeTracerProvider')),
    import('@opentelemetry/exporter-trace-otlp-http').then((m) => commonJsExports(m, 'OTLPTraceExporter')),
    import('@opentelemetry/resources').then((m) => commonJsExports(m, 'resourceFromAttributes')),
    import('@opentelemetry/instrumentation').then((m) => commonJsExports(m, 'registerInstrumentations')),
  ]);
  const [{ HttpInstrumentation }, { UndiciInstrumentation }, { PgInstrumentation }, { FastifyOtelInstrumentation }, { PrismaInstrumentation }] =
    await Promise.all([
      import('@opentelemetry/instrumentation-http').then((m) => commonJsExports(m, 'HttpInstrumentation')),
      import('@opentelemetry/instrumentation-undici').then((m) => commonJsExports(m, 'UndiciInstrumentation')),
      import('@opentelemetry/instrumentation-pg').then((m) => commonJsExports(m, 'PgInstrumentation')),
      import('@fastify/otel').then((m) => commonJsExports(m, 'FastifyOtelInstrumentation')),
      import('@prisma/instrumentation').then((m) => commonJsExports(m, 'PrismaInstrumentation')),
    ]);
  const exporter = new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/+$/, '')}/v1/traces` });
  // A trace starts where a request comes in (a server span: a client's, or an outside caller's).
  // Background loops (epoch polls, outbox relays, worker passes, sleeve ticks) start none, and an
  // internal call follows its caller's decision: tracing costs per request, not per agent x time.
  const requestsOnly = {
    shouldSample: (_c: unknown, _t: string, _n: string, kind: SpanKind) => ({
      decision: kind === SpanKind.SERVER ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD,
    }),
    toString: () => 'RequestsOnly',
  };
  const provider = new NodeTracerProvider({
    sampler: new ParentBasedSampler({ root: requestsOnly }),
    // Two processes of one service (two gateways, two Hippocampus nodes) tell apart in a trace.
    resource: resourceFromAttributes({ 'service.name': opts.serviceName, 'service.instance.id': randomUUID(), 'process.pid': process.pid }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 500 })],
  });
  provider.register(); // global provider, W3C trace-context propagator, AsyncLocalStorage context
  // Scrapes and probes are not traced: they would drown the traces that matter.
  const quiet = (url: string | undefined) => !!url && /^\/(metrics|healthz|readyz|health)(\?|$)/.test(url);
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({ ignoreIncomingRequestHook: (req) => quiet(req.url) }),
      new UndiciInstrumentation(),
      new PgInstrumentation({ enhancedDatabaseReporting: false }), // no query parameters in spans
      new FastifyOtelInstrumentation({ registerOnInitialization: true, instrumentHooks: false, ignorePaths: (o: { url: string }) => quiet(o.url) }),
      // The client's own steps (serialize, compile) are noise next to the queries.
      new PrismaInstrumentation({ ignoreSpanTypes: ['prisma:client:serialize', 'prisma:client:compile', 'prisma:client:connect'] }),
    ],
  });
  active = {
    async shutdown() {
      unregister();
      await provider.shutdown().catch(() => {});
    },
  };
  return active;
}

let active: { shutdown(): Promise<void> } | undefined;

/** True while this process exports spans (startTracing ran): what costs a span is added only then. */
export const tracingOn = (): boolean => active !== undefined;

/** Exports the spans still buffered and stops tracing (a no-op when it is off). */
export async function stopTracing(): Promise<void> {
  const a = active;
  active = undefined;
  await a?.shutdown();
}
