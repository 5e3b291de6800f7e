// Subscriptions over graphql-ws that survive a dropped connection. Every event the router sends
// carries `cursor` (its bus sequence); after a drop the SDK subscribes again with
// `after: <last cursor>`, so the router replays exactly what was missed, and any event at or
// before the last cursor is skipped, so none is seen twice.
import { createClient, type Client } from 'graphql-ws';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { CogError, CogNetworkError, CogProblem, problemFromGraphQL } from './errors.ts';
import { printDocument } from './transport.ts';

/** A WebSocket constructor: the browser's, or `ws` on Node 20 (import the client from `@cog/sdk/node`). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  // biome-ignore lint/suspicious/noExplicitAny: message, close and error events each carry their own shape
  addEventListener(type: string, listener: (ev: any) => void): void;
  // biome-ignore lint/suspicious/noExplicitAny: as above
  removeEventListener?(type: string, listener: (ev: any) => void): void;
}

export interface ResumeOptions {
  /** Resume after this cursor (a cursor from an earlier run); without it the subscription starts live. */
  after?: string;
  /** Reconnections in a row without an event before giving up (default 20). */
  maxReconnects?: number;
  /** Called when a connection dropped and the SDK is resuming (the CLI prints it). */
  onReconnect?: (info: { attempt: number; after: string | undefined; reason: string }) => void;
}

/** An async iterator of one subscription's events; `cursor` is the last one seen, `close()` ends it. */
export interface ResumableSubscription<T> extends AsyncIterableIterator<T> {
  readonly cursor: string | undefined;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const FATAL_CLOSE = new Set([4400, 4401, 4403, 4406, 4409, 4429, 4499]);

/** The graphql-ws connection of one client: lazy, no retries of its own (resume is done per subscription). */
export function wsClient(url: string, impl: WebSocketConstructor | undefined, onSocket?: (s: WebSocketLike) => void): Client {
  const WS = impl ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!WS)
    throw new CogError({
      status: 0,
      code: 'NO_WEBSOCKET',
      detail: 'No WebSocket in this runtime: on Node 20 import createClient from "@cog/sdk/node" (it passes the ws package)',
    });
  const seen = onSocket;
  const Tracked = seen
    ? // biome-ignore lint/suspicious/noExplicitAny: the WebSocket class of the runtime (browser or ws), subclassed to count sockets
      class extends (WS as any) {
        constructor(u: string, p?: string | string[]) {
          super(u, p);
          seen!(this as unknown as WebSocketLike);
        }
      }
    : WS;
  return createClient({ url, webSocketImpl: Tracked, lazy: true, retryAttempts: 0, keepAlive: 10_000, lazyCloseTimeout: 1000 });
}

/** Which field of the result holds the event (a subscription selects one root field). */
function rootOf(data: Record<string, unknown>): Record<string, unknown> {
  const v = Object.values(data)[0];
  return (v && typeof v === 'object' ? v : {}) as Record<string, unknown>;
}

export function resumable<R extends Record<string, unknown>, V extends { after?: string | null }>(
  client: () => Client,
  doc: TypedDocumentNode<R, V>,
  variables: V,
  o: ResumeOptions = {},
): ResumableSubscription<R[keyof R]> {
  const query = printDocument(doc);
  let last: string | undefined = o.after ?? variables.after ?? undefined;
  let closed = false;
  let current: AsyncIterableIterator<{ data?: R | null; errors?: readonly unknown[] }> | null = null;
  let misses = 0;
  const maxReconnects = o.maxReconnects ?? 20;

  const open = () => {
    current = client().iterate({ query, variables: { ...variables, after: last } as Record<string, unknown> }) as never;
    return current!;
  };

  async function next(): Promise<IteratorResult<R[keyof R]>> {
    for (;;) {
      if (closed) return { value: undefined, done: true };
      const it = current ?? open();
      let r: IteratorResult<{ data?: R | null; errors?: readonly unknown[] }>;
      try {
        r = await it.next();
      } catch (e) {
        if (closed) return { value: undefined, done: true };
        current = null;
        const fatal = classify(e);
        if (fatal) throw fatal;
        if (++misses > maxReconnects) throw new CogNetworkError(`subscription: no connection after ${maxReconnects} attempts (${describe(e)})`, e);
        o.onReconnect?.({ attempt: misses, after: last, reason: describe(e) });
        await sleep(Math.min(5000, 100 * 2 ** Math.min(misses, 6)));
        continue;
      }
      if (r.done) {
        current = null;
        if (closed) return { value: undefined, done: true };
        // The server completed it (a restart mid-stream); resume like a drop.
        if (++misses > maxReconnects) return { value: undefined, done: true };
        continue;
      }
      const errors = r.value.errors;
      if (errors?.length) {
        current = null;
        const err = errors[0] as { message?: string; extensions?: Record<string, unknown> };
        if (err.extensions?.code === 'SLOW_CONSUMER') continue; // resume from the last cursor
        throw problemFromGraphQL(err);
      }
      const event = rootOf((r.value.data ?? {}) as Record<string, unknown>);
      const c = typeof event.cursor === 'string' ? event.cursor : undefined;
      if (c !== undefined && last !== undefined && Number(c) <= Number(last)) continue; // seen already
      if (c !== undefined) last = c;
      misses = 0;
      return { value: event as R[keyof R], done: false };
    }
  }

  const sub: ResumableSubscription<R[keyof R]> = {
    get cursor() {
      return last;
    },
    next,
    async return() {
      await sub.close();
      return { value: undefined, done: true };
    },
    async close() {
      closed = true;
      const it = current;
      current = null;
      await it?.return?.();
    },
    [Symbol.asyncIterator]() {
      return sub;
    },
  };
  return sub;
}

/** A problem that resuming cannot fix (refused by the server), or null for a drop. */
function classify(e: unknown): CogError | null {
  if (e instanceof CogError) return e;
  if (Array.isArray(e) && e.length) {
    const err = e[0] as { message?: string; extensions?: Record<string, unknown> };
    return err.extensions?.code === 'SLOW_CONSUMER' ? null : problemFromGraphQL(err);
  }
  const code = (e as { code?: unknown })?.code;
  if (typeof code === 'number' && FATAL_CLOSE.has(code)) {
    return new CogProblem({
      status: 400,
      code: 'SUBSCRIPTION_REFUSED',
      detail: `the router closed the subscription socket (${code}: ${(e as { reason?: string }).reason || 'refused'})`,
    });
  }
  return null;
}

function describe(e: unknown): string {
  const x = e as { code?: unknown; reason?: unknown; message?: unknown };
  if (typeof x?.code === 'number') return `socket closed ${x.code}${x.reason ? `: ${x.reason}` : ''}`;
  return String(x?.message ?? e);
}
