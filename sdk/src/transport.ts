// HTTP to the gateway: signing, bounded retries of 429 and 503 as Retry-After says, problems as
// typed errors. Plain fetch, so the same code runs in a browser and on Node 20.
import { print, type DocumentNode } from 'graphql';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { CogNetworkError, type CogError, problemFrom, problemFromGraphQL } from './errors.ts';
import { signedHeaders, type StackKey } from './sign.ts';

export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  attempts?: number;
  /** The longest wait the SDK accepts; a Retry-After beyond it is reported at once (default 10 000 ms). */
  maxDelayMs?: number;
}

export interface TransportOptions {
  /** The gateway, e.g. http://127.0.0.1:7070 */
  url: string;
  /** Signs every request with this stack's key (needed when the platform runs COG_AUTH=required). */
  key?: StackKey;
  fetch?: typeof fetch;
  retry?: RetryOptions;
  /** Per-attempt timeout (default 30 000 ms; a needlecast waits for its saga and gets 120 000). */
  timeoutMs?: number;
  headers?: Record<string, string>;
  /** Called before each retry wait (the CLI prints it). */
  onRetry?: (info: { attempt: number; delayMs: number; problem: CogError }) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retry-After in ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const t = Date.parse(value);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

export interface RequestOptions {
  /** Whether a network failure may be retried (reads are; a write may have been applied). */
  idempotent?: boolean;
  timeoutMs?: number;
  /** Extra query parameters (encoded into the path that is signed). */
  query?: Record<string, string | number | boolean | undefined>;
}

export class Transport {
  readonly url: string;
  readonly key?: StackKey;
  private readonly fetchImpl: typeof fetch;
  private readonly attempts: number;
  private readonly maxDelayMs: number;

  constructor(readonly options: TransportOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.key = options.key;
    this.fetchImpl = options.fetch ?? ((...a: Parameters<typeof fetch>) => globalThis.fetch(...a));
    this.attempts = Math.max(0, options.retry?.attempts ?? 3);
    this.maxDelayMs = Math.max(0, options.retry?.maxDelayMs ?? 10_000);
  }

  /** One request with retries; resolves with the parsed JSON body of a 2xx answer. */
  async request<T = unknown>(method: string, path: string, body?: unknown, o: RequestOptions = {}): Promise<T> {
    const qs = o.query
      ? Object.entries(o.query)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
          .join('&')
      : '';
    const target = qs ? `${path}?${qs}` : path;
    const text = body === undefined ? '' : JSON.stringify(body);
    const idempotent = o.idempotent ?? (method === 'GET' || method === 'HEAD');
    for (let attempt = 0; ; attempt++) {
      const res = await this.once(method, target, text, o.timeoutMs, idempotent && attempt < this.attempts);
      if (res === 'retry') {
        await this.wait(attempt, undefined, new CogNetworkError(`${method} ${path}: no answer`));
        continue;
      }
      const parsed = await readBody(res);
      if (res.ok) return parsed as T;
      const problem = problemFrom(res.status, parsed, `${method} ${path} answered ${res.status}`);
      const delay = retryDelay(res.status, retryAfterMs(res.headers.get('retry-after')), attempt);
      if (delay !== undefined && attempt < this.attempts && delay <= this.maxDelayMs) {
        this.options.onRetry?.({ attempt: attempt + 1, delayMs: delay, problem });
        await sleep(delay);
        continue;
      }
      throw problem;
    }
  }

  /** A GraphQL operation over HTTP POST /graphql; resolves with `data`, throws the first error as a CogProblem. */
  async graphql<R, V>(doc: TypedDocumentNode<R, V>, variables: V, o: RequestOptions = {}): Promise<R> {
    const query = printed(doc);
    const body = { query, variables: stripUndefined(variables as Record<string, unknown>) };
    for (let attempt = 0; ; attempt++) {
      const out = await this.request<{ data?: R | null; errors?: Array<{ message: string; extensions?: Record<string, unknown> }> }>('POST', '/graphql', body, {
        ...o,
        // A mutation whose answer never came may have run: only queries retry a network failure.
        idempotent: o.idempotent ?? isQuery(doc),
      });
      if (!out.errors?.length) return out.data as R;
      const problem = problemFromGraphQL(out.errors[0]!);
      // An executed operation is HTTP 200 whatever its errors: a 429/503 in extensions means the
      // field was refused before anything changed, so it is retried like the HTTP status.
      const ra = typeof problem.extra.retryAfter === 'number' ? problem.extra.retryAfter * 1000 : undefined;
      const delay = retryDelay(problem.status, ra, attempt);
      if (delay !== undefined && attempt < this.attempts && delay <= this.maxDelayMs) {
        this.options.onRetry?.({ attempt: attempt + 1, delayMs: delay, problem });
        await sleep(delay);
        continue;
      }
      throw problem;
    }
  }

  private async once(method: string, target: string, text: string, timeoutMs: number | undefined, mayRetry: boolean): Promise<Response | 'retry'> {
    const headers: Record<string, string> = { accept: 'application/json, application/problem+json', ...this.options.headers };
    if (text) headers['content-type'] = 'application/json';
    if (this.key) Object.assign(headers, signedHeaders(this.key, method, target, text));
    try {
      return await this.fetchImpl(this.url + target, {
        method,
        headers,
        body: text || undefined,
        signal: AbortSignal.timeout(timeoutMs ?? this.options.timeoutMs ?? 30_000),
      });
    } catch (e) {
      if (mayRetry) return 'retry';
      const why =
        (e as { name?: string })?.name === 'TimeoutError'
          ? 'timed out'
          : String((e as { cause?: { code?: string } })?.cause?.code ?? (e as Error)?.message ?? e);
      throw new CogNetworkError(`${method} ${this.url}${target.split('?')[0]}: ${why} (the platform is not reachable)`, e);
    }
  }

  private async wait(attempt: number, ms: number | undefined, problem: CogNetworkError): Promise<void> {
    const delay = ms ?? backoff(attempt);
    this.options.onRetry?.({ attempt: attempt + 1, delayMs: delay, problem });
    await sleep(delay);
  }
}

const backoff = (attempt: number) => Math.min(4000, 250 * 2 ** attempt);

/** How long to wait before retrying a status; undefined when the status is not retried. */
function retryDelay(status: number, retryAfter: number | undefined, attempt: number): number | undefined {
  if (status !== 429 && status !== 503) return undefined;
  return retryAfter ?? backoff(attempt);
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return { detail: text.slice(0, 500) };
  }
}

const printedCache = new WeakMap<object, string>();
function printed(doc: DocumentNode): string {
  let s = printedCache.get(doc);
  if (!s) printedCache.set(doc, (s = print(doc)));
  return s;
}

const isQuery = (doc: DocumentNode) => doc.definitions.every((d) => d.kind !== 'OperationDefinition' || d.operation === 'query');

export function stripUndefined(o: Record<string, unknown> | undefined): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined));
}

export { printed as printDocument };
