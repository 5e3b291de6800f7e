// WebSocket event stream for REST clients: ws://<gateway>/v1/events?subjects=cog.perceive.*,cog.epoch.advanced
// Each bus event is sent as {subject, type, ts, data, seq}. `since=<seq>` resumes after the last
// event a client saw (replayed from the bus, no gaps). Slow clients are bounded: when more than
// MAX_BUFFERED bytes are waiting on a socket the connection is closed with 4008 ("slow consumer"),
// and the client resumes with `since`. Closing the socket releases its bus consumer.
import { countSockets } from '../lib/metrics.ts';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Platform } from '../lib/platform.ts';
import type { Subscription } from '../lib/bus/port.ts';
import { refuseUpgrade } from '../lib/http.ts';
import { badRequest } from '../lib/errors.ts';
import { watchEmissions, type EmissionWatchHandle } from '../subgraphs/economy/index.ts';

export const MAX_BUFFERED = 1024 * 1024;
const TOKEN = /^[A-Za-z0-9_:-]+$/;

/**
 * A subject filter as the bus takes it: `cog.` then dot-separated tokens, each a name, `*` (one
 * token) or, last only, `>` (the rest); e.g. `cog.perceive.*`, `cog.>`.
 */
const validFilter = (s: string) => {
  const tokens = s.split('.');
  return (
    s.length <= 200 && tokens.length >= 2 && tokens[0] === 'cog' && tokens.every((t, i) => TOKEN.test(t) || t === '*' || (t === '>' && i === tokens.length - 1))
  );
};

export function parseSubjects(raw: string | null): string[] | null {
  if (!raw) return ['cog.>'];
  const list = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!list.length || list.length > 32 || !list.every(validFilter)) return null;
  return list;
}

/**
 * A resume cursor (`since` here, `after` in GraphQL subscriptions): the bus sequence of the last
 * event seen, as digits. Undefined when absent, null when malformed.
 */
export function parseCursor(raw: unknown): number | undefined | null {
  if (raw === null || raw === undefined) return undefined;
  return typeof raw === 'string' && /^\d{1,15}$/.test(raw) ? Number(raw) : null;
}

const refuse = (socket: Duplex, detail: string) => refuseUpgrade(socket, badRequest(detail));

export function createEventStream(p: Platform) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  const uncount = countSockets('events', () => wss.clients.size);

  wss.on('connection', async (ws: WebSocket, req: IncomingMessage) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const subjects = parseSubjects(url.searchParams.get('subjects'))!;
    const since = parseCursor(url.searchParams.get('since')) ?? undefined;
    let sub: Subscription | undefined;
    let closed = false;
    // Emission events are made only for watched stacks: a subject naming a stack watches it.
    const watches: Promise<EmissionWatchHandle>[] = subjects
      .map((s) => /^cog\.treasury\.emitted\.(.+)$/.exec(s)?.[1])
      .filter((id): id is string => !!id && !id.includes('*') && !id.includes('>'))
      .map((id) => watchEmissions(p, id).catch(() => ({ close: async () => {} })));
    ws.on('close', () => {
      closed = true;
      void sub?.close();
      for (const w of watches)
        void w.then(
          (h) => h.close(),
          () => {},
        );
    });
    ws.on('error', () => ws.terminate());
    try {
      sub = await p.bus.subscribe({ subjects, startSeq: since !== undefined ? since + 1 : undefined }, (d) => {
        if (closed) return;
        if (ws.bufferedAmount > MAX_BUFFERED) {
          ws.close(4008, 'slow consumer: resume with since=<last seq>');
          return;
        }
        const type = typeof d.data.type === 'string' ? d.data.type : d.subject;
        ws.send(JSON.stringify({ subject: d.subject, type, ts: d.ts, data: d.data, seq: d.seq }));
      });
      if (closed) await sub.close();
      else ws.send(JSON.stringify({ subject: 'cog.stream.ready', type: 'stream.ready', ts: Date.now(), data: { subjects } }));
    } catch {
      ws.close(1011, 'event bus unavailable');
    }
  });

  return {
    /** Handles an HTTP upgrade for /v1/events; returns false for other paths. */
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname !== '/v1/events') return false;
      if (!parseSubjects(url.searchParams.get('subjects'))) {
        refuse(
          socket,
          'subjects must be a comma-separated list (at most 32) of subject filters: cog. then dot-separated tokens, each a name, * or (last) >, e.g. cog.perceive.*,cog.epoch.advanced',
        );
        return true;
      }
      if (parseCursor(url.searchParams.get('since')) === null) {
        refuse(socket, 'since must be the seq of the last event seen (a non-negative integer)');
        return true;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
      return true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        uncount();
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}
