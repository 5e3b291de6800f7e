// An OTLP/HTTP trace receiver for tests: the platform's real exporter posts JSON to
// `<url>/v1/traces`; the spans are kept flat, with their service and parent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { startCluster, type Cluster } from './cluster.ts';

export interface ReceivedSpan {
  service: string;
  /** service.instance.id: the process that exported it. */
  instance: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
const value = (v: AnyValue | undefined) => v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : (v?.boolValue ?? v?.doubleValue));
const attrs = (list: Array<{ key: string; value: AnyValue }> | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));

/** OTLP's span kinds. */
export const SpanKinds = { SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;

/** A server span's route: fastify's template when it named one, else the path or the span's name. */
export const routeOf = (s: ReceivedSpan): string => String(s.attributes['http.route'] ?? s.attributes['url.path'] ?? s.attributes['http.target'] ?? s.name);

/** A span's ancestors within `trace`, its parent first. */
export function ancestorsIn(trace: readonly ReceivedSpan[]): (s: ReceivedSpan) => ReceivedSpan[] {
  const byId = new Map(trace.map((s) => [s.spanId, s]));
  return (s) => {
    const out: ReceivedSpan[] = [];
    for (let p = s.parentSpanId ? byId.get(s.parentSpanId) : undefined; p; p = p.parentSpanId ? byId.get(p.parentSpanId) : undefined) out.push(p);
    return out;
  };
}

export async function otlpReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        try {
          const doc = JSON.parse(body) as {
            resourceSpans?: Array<{
              resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
              scopeSpans?: Array<{ spans?: Array<Record<string, any>> }>;
            }>;
          };
          for (const rs of doc.resourceSpans ?? []) {
            const resource = attrs(rs.resource?.attributes);
            const service = String(resource['service.name'] ?? '');
            const instance = String(resource['service.instance.id'] ?? '');
            for (const ss of rs.scopeSpans ?? [])
              for (const s of ss.spans ?? [])
                spans.push({
                  service,
                  instance,
                  traceId: s.traceId,
                  spanId: s.spanId,
                  parentSpanId: s.parentSpanId || undefined,
                  name: s.name,
                  kind: s.kind,
                  attributes: attrs(s.attributes),
                });
          }
        } catch {
          res.writeHead(400).end();
          return;
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, spans, close: () => new Promise((r) => server.close(() => r())) };
}

/**
 * A platform started as `npm start` or `cog up --distributed` starts it, exporting its traces to a
 * receiver of its own (the tracing suites' setup).
 */
async function tracedCluster(
  opts: Parameters<typeof startCluster>[0],
): Promise<{ c: Cluster; otlp: Awaited<ReturnType<typeof otlpReceiver>>; stop(): Promise<void> }> {
  const otlp = await otlpReceiver();
  const c = await startCluster({ ...opts, env: { ...opts.env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url } });
  const stop = async () => {
    await c.stop();
    await otlp.close();
  };
  try {
    await c.waitHealthy(240_000);
  } catch (e) {
    await stop();
    throw e;
  }
  return { c, otlp, stop };
}

/** A suite's traced platform: started before its tests, stopped after them; `c` and `otlp` once started. */
export function tracedSuite(opts: Parameters<typeof startCluster>[0]): { readonly c: Cluster; readonly otlp: Awaited<ReturnType<typeof otlpReceiver>> } {
  let t: Awaited<ReturnType<typeof tracedCluster>> | undefined;
  beforeAll(async () => {
    t = await tracedCluster(opts);
  }, 270_000);
  afterAll(async () => {
    await t?.stop();
  }, 60_000);
  return {
    get c() {
      return t!.c;
    },
    get otlp() {
      return t!.otlp;
    },
  };
}
