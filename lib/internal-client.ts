// The one client every internal caller uses to reach another service of the platform (Medulla,
// Hippocampus, the Needlecast Router, DHF): base URL(s), the internal bearer token, a timeout per
// attempt, failover across several base URLs, problem+json answers as Problems, and a 503
// `unavailable` when nothing answers.
import type { Dispatcher } from 'undici';
import { commonJsExports } from './commonjs.ts';
import { Problem, unavailable } from './errors.ts';

// undici loads with the first call: a process makes none before it is up, and the package is a
// megabyte of the modules a start would otherwise parse. Once loaded, calls take it without an await.
let undiciRequest: typeof import('undici').request | undefined;
const loadUndici = async () => (undiciRequest ??= commonJsExports(await import('undici'), 'request').request);

/** The header an internal HTTP client sends (empty when no token is configured). */
export function internalAuthHeaders(token: string | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

export interface InternalClientOptions {
  /** What the service is called in problems ("Hippocampus", "the Needlecast Router"). */
  name: string;
  /** The primary, then its fallbacks: a connection error, a timeout or a 5xx moves on to the next. */
  baseUrls: string | string[];
  /** The internal bearer token (COG_INTERNAL_TOKEN); sent when set. */
  token?: string;
  /** Per-attempt timeout (default 5 s). */
  timeoutMs?: number;
  /** Counters for the caller's metrics: a node failing (and why), a call served after failing over, none answering. */
  observe?: {
    nodeFailed?(reason: 'timeout' | 'unreachable' | '5xx' | 'skipped'): void;
    failedOver?(): void;
    unavailable?(): void;
  };
}

export interface RequestOptions {
  timeoutMs?: number;
  headers?: Record<string, string>;
}

export interface Answer {
  status: number;
  /** The parsed JSON body ({} when there is none). */
  json: Record<string, unknown>;
}

/** A JSON-RPC 2.0 error answer (the service understood the call and refused it). */
export class RpcError extends Error {
  constructor(
    public readonly code: number,
    message: string,
    public readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

export interface InternalClient {
  /** One call; any answer below 500 comes back as it is (the caller reads its status). */
  send(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<Answer>;
  /** One call whose 2xx body is the result; a 4xx is thrown as the Problem its body describes. */
  json<T>(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<T>;
  /** JSON-RPC 2.0 at POST /rpc: the result, or an RpcError for the service's error answer. */
  rpc<T>(method: string, params?: unknown[] | Record<string, unknown>, opts?: RequestOptions): Promise<T>;
}

/** After a node fails, it is tried last for this long: a dead node costs one timeout, not one per call. */
const DOWN_MS = 5000;
/**
 * With fallbacks, a node that failed recently is probed by one call at a time, for at most
 * DOWN_ATTEMPT_MS; concurrent calls skip it. So with every node hung (SIGSTOP) callers get their
 * 503 in milliseconds instead of holding their transactions (and row locks) for the timeouts.
 */
const DOWN_ATTEMPT_MS = 1000;
const downUntil = new Map<string, number>();
const probing = new Set<string>();

/** The nodes in the order to try them: the configured order, nodes that failed recently last. */
function attemptOrder(nodes: string[]): Array<{ base: string; down: boolean }> {
  const now = Date.now();
  const isDown = (u: string) => (downUntil.get(u) ?? 0) > now;
  return [...nodes.filter((u) => !isDown(u)).map((base) => ({ base, down: false })), ...nodes.filter(isDown).map((base) => ({ base, down: true }))];
}

const STANDARD = new Set(['type', 'title', 'status', 'detail', 'code']);

/** A problem+json body as the Problem it was (same status, code and extra members). */
export function problemFromJson(status: number, json: Record<string, unknown>, fallbackTitle: string): Problem {
  const extra = Object.fromEntries(Object.entries(json).filter(([k]) => !STANDARD.has(k)));
  const code = typeof json.code === 'string' ? json.code : `HTTP_${status}`;
  const title = typeof json.title === 'string' ? json.title : fallbackTitle;
  return new Problem(status, code, title, typeof json.detail === 'string' ? json.detail : undefined, extra);
}

let rpcId = 1;

export function internalClient(o: InternalClientOptions): InternalClient {
  const nodes = [...new Set((Array.isArray(o.baseUrls) ? o.baseUrls : [o.baseUrls]).map((u) => u.replace(/\/+$/, '')))];
  if (!nodes.length) throw new Error(`internalClient: no URL for ${o.name}`);
  const auth = internalAuthHeaders(o.token);
  const failed = (reason: 'timeout' | 'unreachable' | '5xx' | 'skipped') => o.observe?.nodeFailed?.(reason);

  /**
   * Tries the nodes in turn. `answers(status, json)` says whether a 5xx reply still is the answer
   * (a JSON-RPC error body); otherwise a 5xx counts as the node failing.
   */
  const attempt = async (
    method: string,
    path: string,
    body: unknown,
    opts: RequestOptions,
    answers?: (status: number, json: unknown) => boolean,
  ): Promise<Answer> => {
    const failures: string[] = [];
    const timeoutMs = opts.timeoutMs ?? o.timeoutMs ?? 5000;
    for (const { base, down } of attemptOrder(nodes)) {
      const probe = down && nodes.length > 1;
      if (probe && probing.has(base)) {
        failures.push(`${base} failed recently`);
        failed('skipped');
        continue;
      }
      if (probe) probing.add(base);
      // undici's request, not fetch: fetch wraps every call in WHATWG streams and Request/Response
      // objects, a tenth of a distributed gateway's CPU under the mixed load (a PUT a perceive, a
      // walk a recall); the same pooled keep-alive connections answer either way.
      const request = undiciRequest ?? (await loadUndici());
      let res: Dispatcher.ResponseData;
      try {
        res = await request(`${base}${path}`, {
          method: method as Dispatcher.HttpMethod,
          headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...opts.headers, ...auth },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(probe ? Math.min(timeoutMs, DOWN_ATTEMPT_MS) : timeoutMs),
        });
      } catch (e) {
        downUntil.set(base, Date.now() + DOWN_MS);
        const timedOut = (e as Error).name === 'TimeoutError';
        failures.push(`${base} ${timedOut ? 'timed out' : 'not reachable'}`);
        failed(timedOut ? 'timeout' : 'unreachable');
        continue;
      } finally {
        if (probe) probing.delete(base);
      }
      const status = res.statusCode;
      let json: unknown;
      try {
        json = await res.body.json();
      } catch (e) {
        if ((e as Error).name === 'TimeoutError') {
          downUntil.set(base, Date.now() + DOWN_MS);
          failures.push(`${base} timed out`);
          failed('timeout');
          continue;
        }
        json = undefined;
      }
      if (status >= 500 && !answers?.(status, json)) {
        downUntil.set(base, Date.now() + DOWN_MS);
        failures.push(`${base} answered ${status}`);
        failed('5xx');
        continue;
      }
      downUntil.delete(base);
      if (failures.length) o.observe?.failedOver?.();
      return { status, json: json && typeof json === 'object' ? (json as Record<string, unknown>) : {} };
    }
    o.observe?.unavailable?.();
    throw unavailable(`no ${o.name} node answered (${failures.join('; ')})`);
  };

  return {
    send: (method, path, body, opts = {}) => attempt(method, path, body, opts),
    async json<T>(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
      const { status, json } = await attempt(method, path, body, opts);
      if (status < 300) return json as T;
      throw problemFromJson(status, json, `${o.name} refused`);
    },
    async rpc<T>(method: string, params: unknown[] | Record<string, unknown> = [], opts: RequestOptions = {}): Promise<T> {
      const isRpc = (_: number, j: unknown) => !!j && typeof j === 'object' && ('result' in j || 'error' in j);
      const { status, json } = await attempt('POST', '/rpc', { jsonrpc: '2.0', id: rpcId++, method, params }, opts, isRpc);
      const error = json.error as { code: number; message: string; data?: unknown } | undefined;
      if (error && typeof error === 'object') throw new RpcError(error.code, error.message, error.data);
      if ('result' in json) return json.result as T;
      // Not a JSON-RPC answer: the HTTP layer refused (401 without the token, 413...).
      if (status >= 400 && typeof json.code === 'string') throw problemFromJson(status, json, `${o.name} refused`);
      throw new RpcError(-32603, `${o.name} answered HTTP ${status} without a JSON-RPC body`);
    },
  };
}
