// How the MCP server reaches the platform: the gateway's /v1 routes (and one GraphQL query) for
// calls, the bus's events for progress and resource updates. Two adapters:
//   * httpGateway (`cog mcp`, stdio): HTTP to COG_BASE_URL, signed with the stack key when one is
//     given, events over the gateway's `/v1/events` WebSocket;
//   * injectGateway (`/mcp` on the gateway): the gateway's own routes through fastify inject (same
//     hooks, validation and answers as over the wire), events from the platform's bus.
import WebSocket from 'ws';
import type { FastifyInstance } from 'fastify';
import type { Bus } from '../lib/bus/port.ts';
import { signRequest } from '../lib/sign.ts';
import type { GatewayCall } from './tools.ts';

export interface GatewayResponse { status: number; body: unknown; headers: Record<string, string> }
export interface GatewayEvent { subject: string; data: Record<string, unknown>; seq: number }
export interface EventSubscription { close(): Promise<void> }

export interface Gateway {
  /** Where it is, for messages. */
  describe: string;
  request(call: GatewayCall): Promise<GatewayResponse>;
  /** Resolves once the subscription is live (events after that point are delivered). */
  subscribe(subjects: string[], onEvent: (e: GatewayEvent) => void): Promise<EventSubscription>;
}

/** A problem the MCP layer itself reports (the gateway could not be asked). */
export class GatewayUnreachable extends Error {
  constructor(readonly detail: string) {
    super(detail);
  }
}

const parse = (text: string): unknown => {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

export interface StackKey { stackId: string; identityPriv: string }

export interface HttpGatewayOptions {
  baseUrl: string;
  /** Signs every request with this stack's key (COG_AUTH=required; harmless when auth is off). */
  key?: StackKey;
  timeoutMs?: number;
}

export function httpGateway(o: HttpGatewayOptions): Gateway {
  const base = o.baseUrl.replace(/\/+$/, '');
  const timeoutMs = o.timeoutMs ?? 90_000;
  return {
    describe: base,
    async request(call) {
      const text = call.body === undefined ? undefined : JSON.stringify(call.body);
      const headers: Record<string, string> = text === undefined ? {} : { 'content-type': 'application/json' };
      if (o.key) Object.assign(headers, signRequest({ method: call.method, path: call.path, body: text ?? '', stackId: o.key.stackId, identityPriv: o.key.identityPriv }));
      let res: Response;
      try {
        res = await fetch(`${base}${call.path}`, { method: call.method, headers, body: text, signal: AbortSignal.timeout(timeoutMs) });
      } catch (e) {
        throw new GatewayUnreachable(`the gateway at ${base} did not answer (${(e as Error).name === 'TimeoutError' ? `no answer in ${timeoutMs} ms` : (e as Error).message}); is the platform running, and is COG_BASE_URL (or --base-url) right?`);
      }
      return { status: res.status, body: parse(await res.text()), headers: Object.fromEntries(res.headers) };
    },
    subscribe: (subjects, onEvent) => wsSubscribe(base, subjects, onEvent),
  };
}

/** `/v1/events` with resume: a dropped socket reconnects with `since` = the last seq seen. */
function wsSubscribe(base: string, subjects: string[], onEvent: (e: GatewayEvent) => void): Promise<EventSubscription> {
  const url = `${base.replace(/^http/, 'ws')}/v1/events?subjects=${encodeURIComponent(subjects.join(','))}`;
  let last: number | undefined;
  let closed = false;
  let ws: WebSocket | undefined;
  let retry: NodeJS.Timeout | undefined;
  const open = (first: boolean) => new Promise<void>((resolve, reject) => {
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
  return open(true).then(() => ({
    async close() {
      closed = true;
      clearTimeout(retry);
      ws?.close();
    },
  }), (e) => {
    closed = true;
    ws?.terminate();
    throw e;
  });
}

export interface InjectGatewayOptions {
  app: FastifyInstance;
  bus: Bus;
  /** The MCP client's address, so the gateway's per-client limits count it, not loopback. */
  remoteAddress?: string;
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
        headers: text === undefined ? {} : { 'content-type': 'application/json' },
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
