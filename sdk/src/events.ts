// The REST event stream, ws://<gateway>/v1/events?subjects=…&since=<seq>, as an async iterator
// that survives dropped connections: it reconnects with `since` = the last seq seen, so the
// gateway replays what was missed, and skips anything at or before it, so nothing repeats.
import { CogNetworkError } from './errors.ts';
import type { ResumeOptions, WebSocketConstructor, WebSocketLike } from './subscribe.ts';

/** One bus event as the stream sends it. */
export interface PlatformEvent {
  subject: string;
  type: string;
  /** Unix ms */
  ts: number;
  data: Record<string, unknown>;
  /** Bus sequence: pass it as `since` to resume after this event. */
  seq: number;
}

export interface EventStream extends AsyncIterableIterator<PlatformEvent> {
  /** The seq of the last event seen (resume with it as `since`). */
  readonly since: number | undefined;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function eventStream(
  baseUrl: string,
  WS: WebSocketConstructor,
  subjects: string[],
  o: ResumeOptions & { since?: number; onSocket?: (s: WebSocketLike) => void } = {},
): EventStream {
  const wsBase = baseUrl.replace(/^http/, 'ws');
  let since = o.since;
  let closed = false;
  let socket: WebSocketLike | null = null;
  const queue: PlatformEvent[] = [];
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  let misses = 0;
  let connecting: Promise<void> | null = null;
  const maxReconnects = o.maxReconnects ?? 20;
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  const connect = (): Promise<void> => {
    const url = `${wsBase}/v1/events?subjects=${encodeURIComponent(subjects.join(','))}${since !== undefined ? `&since=${since}` : ''}`;
    const ws = new WS(url);
    socket = ws;
    o.onSocket?.(ws);
    let opened = false;
    ws.addEventListener('open', () => (opened = true));
    ws.addEventListener('message', (ev: { data: unknown }) => {
      const raw = typeof ev.data === 'string' ? ev.data : new TextDecoder().decode(ev.data as Uint8Array);
      let m: PlatformEvent;
      try {
        m = JSON.parse(raw);
      } catch {
        return;
      }
      if (m.subject === 'cog.stream.ready' || typeof m.seq !== 'number') {
        misses = 0;
        return;
      }
      if (since !== undefined && m.seq <= since) return; // seen already
      since = m.seq;
      queue.push(m);
      poke();
    });
    return new Promise<void>((resolve) => {
      ws.addEventListener('close', (ev: { code?: number; reason?: string }) => {
        if (socket === ws) socket = null;
        resolve();
        if (closed) return poke();
        const reason = `closed ${ev.code ?? ''}${ev.reason ? `: ${ev.reason}` : ''}${opened ? '' : ' before it opened'}`;
        if (++misses > maxReconnects) {
          failure = new CogNetworkError(`event stream: no connection after ${maxReconnects} attempts (${reason}; is the gateway at ${baseUrl} running?)`);
          return poke();
        }
        o.onReconnect?.({ attempt: misses, after: since === undefined ? undefined : String(since), reason });
        connecting = sleep(Math.min(5000, 100 * 2 ** Math.min(misses, 6))).then(() => {
          connecting = null;
          if (!closed) void connect();
        });
      });
      ws.addEventListener('error', () => {
        /* a close follows */
      });
    });
  };
  void connect();

  const stream: EventStream = {
    get since() {
      return since;
    },
    async next() {
      for (;;) {
        if (queue.length) return { value: queue.shift()!, done: false };
        if (failure) {
          const f = failure;
          failure = null;
          await stream.close();
          throw f;
        }
        if (closed) return { value: undefined, done: true };
        await new Promise<void>((r) => (wake = r));
      }
    },
    async return() {
      await stream.close();
      return { value: undefined, done: true };
    },
    async close() {
      closed = true;
      socket?.close(1000, 'client done');
      socket = null;
      await connecting;
      poke();
    },
    [Symbol.asyncIterator]() {
      return stream;
    },
  };
  return stream;
}
