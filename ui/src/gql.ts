// The inspector's only door to the platform: POST /graphql for queries and mutations, graphql-ws on
// /graphql for subscriptions. A subscription that loses its socket comes back by itself with
// `after` set to the last cursor it received, so nothing in between is missed (router/subscriptions.ts).
import { createClient, type Client } from 'graphql-ws';
import { hasKey, signHeaders } from './sign.ts';

export class GqlError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** A query or mutation. `asStack`: sign it with that stack's key when the page holds one. */
export async function gql<T = any>(query: string, variables: Record<string, unknown> = {}, asStack?: string): Promise<T> {
  const body = JSON.stringify({ query, variables });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (asStack && hasKey(asStack)) Object.assign(headers, signHeaders(asStack, 'POST', '/graphql', body));
  const r = await fetch('/graphql', { method: 'POST', headers, body });
  const j = await r.json().catch(() => null);
  if (j?.errors?.length) throw new GqlError(j.errors[0].message, j.errors[0].extensions?.code);
  if (!r.ok || !j?.data) throw new GqlError(j?.detail ?? j?.title ?? `HTTP ${r.status}`, j?.code);
  return j.data as T;
}

export type LinkState = 'connecting' | 'live' | 'reconnecting';
let state: LinkState = 'connecting';
const stateListeners = new Set<(s: LinkState) => void>();
const setState = (s: LinkState) => {
  state = s;
  stateListeners.forEach((l) => l(s));
};
export const linkState = () => state;
export function onLinkState(l: (s: LinkState) => void): () => void {
  stateListeners.add(l);
  return () => stateListeners.delete(l);
}

/** The newest bus cursor any subscription delivered: a "now" to start a new subscription from. */
let newestCursor: string | undefined;
export const lastCursor = () => newestCursor;
const noteCursor = (c: string) => {
  if (!newestCursor || BigInt(c) > BigInt(newestCursor)) newestCursor = c;
};

let client: Client | undefined;
function ws(): Client {
  return (client ??= createClient({
    url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`,
    lazy: true,
    // Retries are ours (live below), so each subscription resumes from its own cursor.
    retryAttempts: 0,
    keepAlive: 10_000,
    on: {
      connected: () => setState('live'),
      closed: () => setState('reconnecting'),
    },
  }));
}

/**
 * A live subscription to one field: `onEvent` gets each event (with its cursor). Resumes after a
 * dropped socket or a SLOW_CONSUMER end from the last cursor, backing off up to 5 s; other GraphQL
 * errors end it (onError). Returns the stop function.
 */
export function live<T extends { cursor: string }>(
  query: string,
  variables: Record<string, unknown>,
  field: string,
  onEvent: (e: T) => void,
  onError?: (e: Error) => void,
): () => void {
  let after = variables.after as string | undefined;
  let stopped = false;
  let attempt = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let unsubscribe: (() => void) | undefined;
  const retry = () => {
    if (stopped) return;
    timer = setTimeout(start, Math.min(5000, 200 * 2 ** attempt++));
  };
  const start = () => {
    if (stopped) return;
    unsubscribe = ws().subscribe<Record<string, T>>(
      { query, variables: { ...variables, after } },
      {
        next: (msg) => {
          attempt = 0;
          const ev = msg.data?.[field];
          if (!ev) {
            if (msg.errors?.length) onError?.(new GqlError(msg.errors[0].message, (msg.errors[0].extensions as any)?.code));
            return;
          }
          after = ev.cursor;
          noteCursor(ev.cursor);
          onEvent(ev);
        },
        error: (e) => {
          const errs = Array.isArray(e) ? e : null;
          if (errs?.every((x) => x?.extensions?.code !== 'SLOW_CONSUMER')) {
            onError?.(new GqlError(errs[0]?.message ?? 'subscription failed', errs[0]?.extensions?.code));
            return;
          }
          retry(); // a closed socket (CloseEvent) or a slow-consumer end: resume from `after`
        },
        complete: retry,
      },
    );
  };
  start();
  return () => {
    stopped = true;
    clearTimeout(timer);
    unsubscribe?.();
  };
}
