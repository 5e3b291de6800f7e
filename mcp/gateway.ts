// How the MCP server reaches the platform: the gateway's /v1 routes (and one GraphQL query) for
// calls, the bus's events for progress and resource updates. Two adapters:
//   * httpGateway (`cog mcp`, stdio): the SDK's transport (@cog/sdk: HTTP to COG_BASE_URL, signed
//     with the stack key when one is given, 429/503 retried as Retry-After says, within a bound),
//     events over the gateway's `/v1/events` WebSocket;
//   * injectGateway (`/mcp` on the gateway): the gateway's own routes through fastify inject (same
//     hooks, validation and answers as over the wire), events from the platform's bus.
import WebSocket from 'ws';
import type { FastifyInstance } from 'fastify';
import type { Bus } from '../lib/bus/port.ts';
import { CogError, CogNetworkError, createClient, type StackKey } from '@cog/sdk/node';
import type { GatewayCall, ProblemBody } from './tools.ts';

export type { StackKey };

export interface GatewayResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}
export interface GatewayEvent {
  subject: string;
  data: Record<string, unknown>;
  seq: number;
}
export interface EventSubscription {
  close(): Promise<void>;
}

export interface Gateway {
  /** Where it is, for messages. */
  describe: string;
  request(call: GatewayCall): Promise<GatewayResponse>;
  /** Resolves once the subscription is live (events after that point are delivered). */
  subscribe(subjects: string[], onEvent: (e: GatewayEvent) => void): Promise<EventSubscription>;
}

/** The gateway could not be asked; `problem` is the SDK's NETWORK problem (status 0: no HTTP answer). */
export class GatewayUnreachable extends Error {
  readonly problem: ProblemBody;
  constructor(readonly detail: string) {
    super(detail);
    this.problem = new CogNetworkError(detail).toJSON() as ProblemBody;
  }
}

/** A body as JSON when it is JSON. */
const parse = (text: string): unknown => {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

export interface HttpGatewayOptions {
  baseUrl: string;
  /** Signs every request with this stack's key (COG_AUTH=required; harmless when auth is off). */
  key?: StackKey;
  timeoutMs?: number;
}

export function httpGateway(o: HttpGatewayOptions): Gateway {
  const base = o.baseUrl.replace(/\/+$/, '');
  const timeoutMs = o.timeoutMs ?? 90_000;
  const sdk = createClient({ url: base, key: o.key, timeoutMs });
  return {
    describe: base,
    async request(call) {
      try {
        const body = await sdk.http.request(call.method, call.path, call.body);
        return { status: 200, body: body ?? null, headers: {} };
      } catch (e) {
        if (e instanceof CogNetworkError) throw new GatewayUnreachable(`${e.detail}; is the platform running, and is COG_BASE_URL (or --base-url) right?`);
        if (e instanceof CogError) return { status: e.status, body: e.toJSON(), headers: {} };
        throw e;
      }
    },
    subscribe: (subjects, onEvent) => wsSubscribe(base, subjects, onEvent),
  };
}

// Not the SDK's eventStream: needlecast must know its listener is live (the stream's ready
// message) before it starts the saga, and the SDK's iterator does not say when that is.
/** `/v1/events` with resume: a dropped socket reconnects with `since` = the last seq seen. */
function wsSubscribe(base: string, subjects: string[], onEvent: (e: GatewayEvent) => void): Promise<EventSubscription> {
  const url = `${base.replace(/^http/, 'ws')}/v1/events?subjects=${encodeURIComponent(subjects.join(','))}`;
  let last: number | undefined;
  let closed = false;
  let ws: WebSocket | undefined;
  let retry: NodeJS.Timeout | undefined;
  const open = (first: boolean) =>
    new Promise<void>((resolve, reject) => {
      const sock = new WebSocket(last === undefined ? url : `${url}&since=${last}`);
      ws = sock;
      let ready = false;
      sock.on('message', (raw) => {
        let m: { subject?: string; data?: Record<string, unknown>; seq?: number };
        try {
          m = JSON.parse(String(raw));
        } catch {
          return;
        }
        if (m.subject === 'cog.stream.ready') {
          ready = true;
          return resolve();
        }
        if (typeof m.seq === 'number') last = m.seq;
        if (m.subject) onEvent({ subject: m.subject, data: m.data ?? {}, seq: m.seq ?? 0 });
      });
      sock.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () => reject(new GatewayUnreachable(`the gateway refused the event stream (${res.statusCode}): ${body.slice(0, 300)}`)));
      });
      sock.on('error', (e) => {
        if (!ready && first) reject(new GatewayUnreachable(`the gateway's event stream at ${base} did not open: ${e.message}`));
      });
      sock.on('close', () => {
        if (closed || (!ready && first)) return;
        retry = setTimeout(() => void open(false).catch(() => {}), 500);
        retry.unref();
      });
    });
  return open(true).then(
    () => ({
      async close() {
        closed = true;
        clearTimeout(retry);
        ws?.close();
      },
    }),
    (e) => {
      closed = true;
      ws?.terminate();
      throw e;
    },
  );
}

export interface InjectGatewayOptions {
  app: FastifyInstance;
  bus: Bus;
  /** The MCP client's address, so the gateway's per-client limits count it, not loopback. */
  remoteAddress?: string;
  /** Headers every inner call carries (the gateway's mark that the /mcp message was already counted). */
  headers?: Record<string, string>;
}

export function injectGateway(o: InjectGatewayOptions): Gateway {
  return {
    describe: 'this gateway',
    async request(call) {
      const text = call.body === undefined ? undefined : JSON.stringify(call.body);
      const res = await o.app.inject({
        method: call.method as 'GET',
        url: call.path,
        payload: text,
        headers: { ...o.headers, ...(text === undefined ? {} : { 'content-type': 'application/json' }) },
        remoteAddress: o.remoteAddress,
      });
      const headers = Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, String(v)]));
      return { status: res.statusCode, body: parse(res.payload), headers };
    },
    async subscribe(subjects, onEvent) {
      const sub = await o.bus.subscribe({ subjects }, (d) => onEvent({ subject: d.subject, data: d.data, seq: d.seq }));
      return { close: () => sub.close() };
    },
  };
}
