// WebSocket event stream for REST clients: ws://<gateway>/v1/events?subjects=cog.perceive.*,cog.epoch.advanced
// Each bus event is sent as {subject, type, ts, data, seq}. `since=<seq>` resumes after the last
// event a client saw (replayed from the bus, no gaps). Slow clients are bounded: when more than
// MAX_BUFFERED bytes are waiting on a socket the connection is closed with 4008 ("slow consumer"),
// and the client resumes with `since`. Closing the socket releases its bus consumer.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Platform } from '../lib/platform.ts';
import type { Subscription } from '../lib/bus/port.ts';

export const MAX_BUFFERED = 1024 * 1024;
const SUBJECT = /^[A-Za-z0-9_:.\-*>]+$/;

export function parseSubjects(raw: string | null): string[] | null {
  if (!raw) return ['cog.>'];
  const list = raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (!list.length || list.length > 32 || list.some((s) => !SUBJECT.test(s) || s.length > 200)) return null;
  return list;
}

export function createEventStream(p: Platform) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });

  wss.on('connection', async (ws: WebSocket, req: IncomingMessage) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const subjects = parseSubjects(url.searchParams.get('subjects'))!;
    const sinceRaw = url.searchParams.get('since');
    const since = sinceRaw && /^\d+$/.test(sinceRaw) ? Number(sinceRaw) : undefined;
    let sub: Subscription | undefined;
    let closed = false;
    ws.on('close', () => {
      closed = true;
      void sub?.close();
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
        socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\nconnection: close\r\n\r\n' +
          JSON.stringify({ type: 'https://cog.dev/problems/bad-request', title: 'Bad request', status: 400, detail: 'subjects must be a comma-separated list of subject filters', code: 'BAD_REQUEST' }));
        return true;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
      return true;
    },
    close: () => new Promise<void>((resolve) => {
      for (const c of wss.clients) c.terminate();
      wss.close(() => resolve());
    }),
  };
}
