// In-process bus with JetStream's semantics: one ordered log (sequences from 1), message-id
// de-duplication within a window, filtered consumers that replay from a sequence, durable
// consumers whose position survives close/re-subscribe, explicit acks with redelivery after
// ackWait, nak, and maxInFlight (max_ack_pending). Retention is bounded to the last N messages.
import fs from 'node:fs';
import path from 'node:path';
import type { Bus, BusEvent, Delivery, PublishInput, PublishResult, SubscribeOptions, Subscription } from './port.ts';
import { subjectMatches } from './port.ts';
import {
  DEFAULT_DUPLICATE_WINDOW_MS,
  type HandlerErrorReporter,
  assertData,
  assertPublishSubject,
  makeDelivery,
  normalizeSubscribe,
  reportToStderr,
  runHandler,
} from './common.ts';

export interface MemoryBusOptions {
  /** Messages retained (oldest dropped first). Default 100 000. */
  maxMessages?: number;
  /** Message-id de-duplication window. Default 2 minutes, as the JetStream stream. */
  duplicateWindowMs?: number;
  onHandlerError?: HandlerErrorReporter;
  /**
   * Keep the log and the durable consumers' positions in this directory, so that an embedded
   * platform's events (and resume cursors) survive a restart. Without it the bus lives in memory.
   */
  journalDir?: string;
}

interface Stored {
  seq: number;
  subject: string;
  ts: number;
  /** Kept serialised so every delivery gets its own copy, as over the wire. */
  json: string;
  /** The publish's traceparent (a message header over NATS). */
  tp?: string;
}

/** Bounded log: exact retention with O(1) amortised trimming. */
class Log {
  private items: (Stored | undefined)[] = [];
  private head = 0;
  lastSeq = 0;

  constructor(private readonly max: number) {}

  get firstSeq(): number {
    const first = this.items[this.head];
    return first ? first.seq : this.lastSeq + 1;
  }

  append(subject: string, json: string, tp?: string): Stored {
    const m: Stored = { seq: ++this.lastSeq, subject, ts: Date.now(), json, ...(tp ? { tp } : {}) };
    this.items.push(m);
    while (this.items.length - this.head > this.max) this.items[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return m;
  }

  /** Puts back a message loaded from the journal (in sequence order). */
  restore(m: Stored): void {
    this.items.push({ seq: m.seq, subject: m.subject, ts: m.ts, json: m.json, ...(m.tp ? { tp: m.tp } : {}) });
    this.lastSeq = m.seq;
    while (this.items.length - this.head > this.max) this.items[this.head++] = undefined;
  }

  get(seq: number): Stored | undefined {
    const first = this.items[this.head];
    if (!first || seq < first.seq || seq > this.lastSeq) return undefined;
    return this.items[this.head + (seq - first.seq)];
  }
}

interface Pending {
  count: number;
  /** Monotonic ms (performance.now), immune to wall-clock jumps. */
  dueAt: number;
}

const monotonic = () => performance.now();

/** A consumer's state: cursor, unacked messages, and the workers (subscriptions) pulling from it. */
class Consumer {
  cursor: number;
  readonly pending = new Map<number, Pending>();
  readonly workers = new Set<Worker>();
  private waiters: (() => void)[] = [];
  private timer?: NodeJS.Timeout;

  constructor(
    readonly name: string,
    private readonly log: Log,
    public filters: string[],
    public ackWaitMs: number,
    public maxInFlight: number,
    startSeq: number,
  ) {
    this.cursor = startSeq;
  }

  /** Next message for a worker: a due redelivery first, else the next matching new message. */
  take(now: number): { m: Stored; count: number } | null {
    let dueSeq: number | undefined;
    for (const [seq, p] of this.pending) {
      if (seq < this.log.firstSeq) {
        this.pending.delete(seq); // dropped by retention
        continue;
      }
      if (p.dueAt <= now && (dueSeq === undefined || seq < dueSeq)) dueSeq = seq;
    }
    if (dueSeq !== undefined) {
      const p = this.pending.get(dueSeq)!;
      p.count++;
      p.dueAt = now + this.ackWaitMs;
      this.schedule();
      return { m: this.log.get(dueSeq)!, count: p.count };
    }
    // Re-arm the timer in case it fired a hair before the due time.
    this.schedule();
    if (this.pending.size >= this.maxInFlight) return null;
    this.cursor = Math.max(this.cursor, this.log.firstSeq);
    while (this.cursor <= this.log.lastSeq) {
      const m = this.log.get(this.cursor++)!;
      if (this.filters.some((f) => subjectMatches(f, m.subject))) {
        this.pending.set(m.seq, { count: 1, dueAt: now + this.ackWaitMs });
        this.schedule();
        return { m, count: 1 };
      }
    }
    return null;
  }

  ack(seq: number): void {
    if (this.pending.delete(seq)) {
      this.schedule();
      this.wake();
    }
  }

  nak(seq: number, delayMs = 0): void {
    const p = this.pending.get(seq);
    if (!p) return;
    p.dueAt = monotonic() + delayMs;
    this.schedule();
    this.wake();
  }

  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }

  /** One timer for the earliest redelivery; only needed while a worker is attached. */
  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.workers.size === 0 || this.pending.size === 0) return;
    let next = Infinity;
    for (const p of this.pending.values()) next = Math.min(next, p.dueAt);
    this.timer = setTimeout(() => this.wake(), Math.max(1, next - monotonic()));
    this.timer.unref();
  }

  stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

class Worker implements Subscription {
  private closed = false;

  constructor(
    private readonly consumer: Consumer,
    private readonly handler: (d: Delivery) => void | Promise<void>,
    private readonly autoAck: boolean,
    private readonly report: HandlerErrorReporter,
    private readonly onClose: (w: Worker) => void,
  ) {
    consumer.workers.add(this);
    // Start after subscribe() has returned the subscription to its caller.
    setImmediate(() => void this.run());
  }

  private async run(): Promise<void> {
    const c = this.consumer;
    c.schedule();
    while (!this.closed) {
      const item = c.take(monotonic());
      if (!item) {
        await c.wait();
        continue;
      }
      const { m, count } = item;
      const event: BusEvent = { subject: m.subject, seq: m.seq, ts: m.ts, data: JSON.parse(m.json), ...(m.tp ? { traceparent: m.tp } : {}) };
      const d = makeDelivery(
        event,
        count,
        () => c.ack(m.seq),
        (delay) => c.nak(m.seq, delay),
      );
      await runHandler(this.handler, d, this.autoAck, this.report, c.name);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.consumer.workers.delete(this);
    if (this.consumer.workers.size === 0) this.consumer.stopTimer();
    this.consumer.wake();
    this.onClose(this);
  }
}

/**
 * The log's journal: append-only JSONL segments (`bus-<n>.jsonl`), the newest one written, plus a
 * positions file for durable consumers. A segment is closed at a quarter of the retained count and
 * the oldest one deleted once the newer ones hold the whole retention, so nothing is rewritten: the
 * single file this replaced was compacted in place, which read, parsed and rewrote 200,000 lines
 * on the event loop (2 s of a stopped platform every 100,000 events: the outbox bench's one sample
 * past two epochs per run). A `bus.jsonl` left by that version is read as the oldest segment.
 */
class Journal {
  private readonly posFile: string;
  /** Oldest first, by number (the old version's `bus.jsonl` is 0); the last one is open for appends. */
  private segments: { file: string; n: number; lines: number }[] = [];
  private fd = -1;
  private readonly segmentLines: number;

  constructor(
    private readonly dir: string,
    private readonly max: number,
  ) {
    fs.mkdirSync(dir, { recursive: true });
    this.posFile = path.join(dir, 'bus-durables.json');
    this.segmentLines = Math.max(1000, Math.ceil(max / 4));
  }

  private static readonly SEGMENT = /^bus-(\d+)\.jsonl$/;

  /** Stored messages (oldest first, at most `max`) and their message ids; opens a segment for appends. */
  load(): { items: (Stored & { msgId?: string })[]; positions: Record<string, number> } {
    const found = fs
      .readdirSync(this.dir)
      .flatMap((name) => {
        const m = Journal.SEGMENT.exec(name);
        return m ? [{ name, n: Number(m[1]) }] : name === 'bus.jsonl' ? [{ name, n: 0 }] : [];
      })
      .sort((a, b) => a.n - b.n);
    const items: (Stored & { msgId?: string })[] = [];
    this.segments = [];
    for (const { name, n } of found) {
      const file = path.join(this.dir, name);
      let lines = 0;
      const all = fs.readFileSync(file, 'utf8').split('\n');
      // Only a file's last line can be torn (a crash during its last append): it is parsed whole.
      let last = all.length - 1;
      while (last >= 0 && !all[last]) last--;
      all.forEach((line, i) => {
        if (!line) return;
        lines++;
        try {
          items.push(Journal.parseLine(line, i === last));
        } catch {
          /* a torn last line from a crash */
        }
      });
      this.segments.push({ file, n, lines });
    }
    // A new segment after a restart: the last one may end in a torn line.
    this.openSegment((this.segments.at(-1)?.n ?? 0) + 1);
    let positions: Record<string, number> = {};
    try {
      positions = JSON.parse(fs.readFileSync(this.posFile, 'utf8'));
    } catch {
      /* none yet */
    }
    return { items: items.slice(-this.max), positions };
  }

  private openSegment(n: number): void {
    const file = path.join(this.dir, `bus-${String(n).padStart(8, '0')}.jsonl`);
    this.fd = fs.openSync(file, 'a');
    this.segments.push({ file, n, lines: 0 });
  }

  /**
   * A journal line: the message's fields, then its payload as the JSON it already is (`"data"`, last),
   * not escaped again as a string. Lines of the older form (`"json"`, the payload as a string) load too.
   */
  private static line(m: Stored, msgId: string | undefined): string {
    const tp = m.tp ? `,"tp":${JSON.stringify(m.tp)}` : '';
    const id = msgId ? `,"msgId":${JSON.stringify(msgId)}` : '';
    return `{"seq":${m.seq},"subject":${JSON.stringify(m.subject)},"ts":${m.ts}${tp}${id},"data":${m.json}}\n`;
  }

  /**
   * A stored message from a journal line. The payload is the text after the first `,"data":` (no
   * JSON string of the fields before it can hold that unescaped), taken as it is; `whole` (a file's
   * last line, which a crash may have cut short) parses the whole line first, so a torn one throws.
   */
  static parseLine(line: string, whole: boolean): Stored & { msgId?: string } {
    const at = line.indexOf(',"data":');
    if (at < 0) return JSON.parse(line); // the older form
    if (whole) JSON.parse(line);
    const head = JSON.parse(`${line.slice(0, at)}}`) as Omit<Stored, 'json'> & { msgId?: string };
    return { ...head, json: line.slice(at + ',"data":'.length, -1) };
  }

  /** Appends messages in one write (a write a message was two thirds of the relay's publish under load). */
  append(entries: ReadonlyArray<{ m: Stored; msgId?: string }>): void {
    if (!entries.length) return;
    let text = '';
    for (const { m, msgId } of entries) text += Journal.line(m, msgId);
    fs.writeSync(this.fd, text);
    const open = this.segments.at(-1)!;
    open.lines += entries.length;
    if (open.lines < this.segmentLines) return;
    fs.closeSync(this.fd);
    this.openSegment(open.n + 1);
    // The oldest segments the newer ones make redundant (they hold `max` lines without them).
    let total = this.segments.reduce((n, g) => n + g.lines, 0);
    while (this.segments.length > 1 && total - this.segments[0].lines >= this.max) {
      const old = this.segments.shift()!;
      total -= old.lines;
      fs.unlink(old.file, () => {}); // off the event loop; one left behind is dropped at the next load's slice
    }
  }

  savePositions(positions: Record<string, number>): void {
    const tmp = this.posFile + '.tmp';
    fs.writeFileSync(tmp, JSON.stringify(positions));
    fs.renameSync(tmp, this.posFile);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

export class MemoryBus implements Bus {
  private readonly log: Log;
  private readonly duplicateWindowMs: number;
  private readonly report: HandlerErrorReporter;
  private readonly seen = new Map<string, { seq: number; at: number }>();
  private readonly durables = new Map<string, Consumer>();
  private readonly active = new Set<Consumer>();
  private readonly workers = new Set<Worker>();
  private ephemeralSerial = 0;
  private closed = false;
  private readonly journal?: Journal;
  private positions: Record<string, number> = {};
  private positionTimer?: NodeJS.Timeout;

  constructor(opts: MemoryBusOptions = {}) {
    const max = opts.maxMessages ?? 100_000;
    if (!(Number.isSafeInteger(max) && max >= 1)) throw new Error(`maxMessages must be an integer >= 1, got ${max}`);
    this.log = new Log(max);
    this.duplicateWindowMs = opts.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
    this.report = opts.onHandlerError ?? reportToStderr;
    if (opts.journalDir) {
      this.journal = new Journal(opts.journalDir, max);
      const { items, positions } = this.journal.load();
      const now = Date.now();
      for (const m of items) {
        this.log.restore(m);
        if (m.msgId && m.ts > now - this.duplicateWindowMs) this.seen.set(m.msgId, { seq: m.seq, at: m.ts });
      }
      this.positions = positions;
      this.positionTimer = setInterval(() => this.savePositions(), 1000);
      this.positionTimer.unref();
    }
  }

  /** Each durable's first unacked sequence. */
  private savePositions(): void {
    if (!this.journal) return;
    for (const [name, c] of this.durables) {
      let floor = c.cursor;
      for (const seq of c.pending.keys()) floor = Math.min(floor, seq);
      this.positions[name] = floor;
    }
    this.journal.savePositions(this.positions);
  }

  async publish(subject: string, data: Record<string, unknown>, opts?: { msgId?: string; traceparent?: string }): Promise<PublishResult> {
    return this.publishSync([{ subject, data, ...opts }])[0]!;
  }

  async publishMany(msgs: readonly PublishInput[]): Promise<PublishResult[]> {
    return this.publishSync(msgs);
  }

  /** Logs the messages in order and journals the ones logged in one write, even when one part way throws. */
  private publishSync(msgs: readonly PublishInput[]): PublishResult[] {
    if (this.closed) throw new Error('bus is closed');
    const out: PublishResult[] = [];
    const journaled: Array<{ m: Stored; msgId?: string }> = [];
    const now = Date.now();
    for (const [id, s] of this.seen) {
      if (s.at > now - this.duplicateWindowMs) break; // insertion order is time order
      this.seen.delete(id);
    }
    try {
      for (const { subject, data, msgId, traceparent } of msgs) {
        assertPublishSubject(subject);
        assertData(data);
        const json = JSON.stringify(data);
        const s = msgId ? this.seen.get(msgId) : undefined;
        if (s) {
          out.push({ seq: s.seq, duplicate: true });
          continue;
        }
        const m = this.log.append(subject, json, traceparent);
        journaled.push({ m, msgId });
        if (msgId) this.seen.set(msgId, { seq: m.seq, at: now });
        out.push({ seq: m.seq, duplicate: false });
      }
    } finally {
      this.journal?.append(journaled);
      if (journaled.length) for (const c of this.active) c.wake();
    }
    return out;
  }

  async subscribe(opts: SubscribeOptions, handler: (d: Delivery) => void | Promise<void>): Promise<Subscription> {
    if (this.closed) throw new Error('bus is closed');
    const o = normalizeSubscribe(opts);
    let consumer: Consumer;
    if (o.durable) {
      const existing = this.durables.get(o.durable);
      if (existing) {
        // The stored position wins over startSeq, as for a JetStream durable.
        existing.filters = o.subjects;
        existing.ackWaitMs = o.ackWaitMs;
        existing.maxInFlight = o.maxInFlight;
        consumer = existing;
      } else {
        const start = this.positions[o.durable] ?? o.startSeq ?? this.log.lastSeq + 1;
        consumer = new Consumer(o.durable, this.log, o.subjects, o.ackWaitMs, o.maxInFlight, start);
        this.durables.set(o.durable, consumer);
      }
    } else {
      const name = `ephemeral-${++this.ephemeralSerial}`;
      consumer = new Consumer(name, this.log, o.subjects, o.ackWaitMs, o.maxInFlight, o.startSeq ?? this.log.lastSeq + 1);
    }
    this.active.add(consumer);
    const worker = new Worker(consumer, handler, o.autoAck, this.report, (w) => {
      this.workers.delete(w);
      if (consumer.workers.size === 0) this.active.delete(consumer); // an ephemeral is gone with it
    });
    this.workers.add(worker);
    return worker;
  }

  async lastSeq(): Promise<number> {
    return this.log.lastSeq;
  }

  async consumerLag(): Promise<Array<{ consumer: string; pending: number }>> {
    return [...this.durables.values()].map((c) => {
      let n = c.pending.size;
      for (let seq = Math.max(c.cursor, this.log.firstSeq); seq <= this.log.lastSeq; seq++) {
        const m = this.log.get(seq);
        if (m && c.filters.some((f) => subjectMatches(f, m.subject))) n++;
      }
      return { consumer: c.name, pending: n };
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.workers].map((w) => w.close()));
    if (this.positionTimer) clearInterval(this.positionTimer);
    this.savePositions();
    this.journal?.close();
  }
}
