// An OTLP/HTTP trace receiver for tests: the platform's real exporter posts JSON to
// `<url>/v1/traces`; the spans are kept flat, with their service and parent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

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
