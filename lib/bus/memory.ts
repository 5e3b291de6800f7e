// In-process bus with JetStream's semantics: one ordered log (sequences from 1), message-id
// de-duplication within a window, filtered consumers that replay from a sequence, durable
// consumers whose position survives close/re-subscribe, explicit acks with redelivery after
// ackWait, nak, and maxInFlight (max_ack_pending). Retention is bounded to the last N messages.
import type { Bus, BusEvent, Delivery, PublishResult, SubscribeOptions, Subscription } from './port.ts';
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
}

interface Stored {
  seq: number;
  subject: string;
  ts: number;
  /** Kept serialised so every delivery gets its own copy, as over the wire. */
  json: string;
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

  append(subject: string, json: string): Stored {
    const m: Stored = { seq: ++this.lastSeq, subject, ts: Date.now(), json };
    this.items.push(m);
    while (this.items.length - this.head > this.max) this.items[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return m;
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
      const event: BusEvent = { subject: m.subject, seq: m.seq, ts: m.ts, data: JSON.parse(m.json) };
      const d = makeDelivery(event, count, () => c.ack(m.seq), (delay) => c.nak(m.seq, delay));
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

  constructor(opts: MemoryBusOptions = {}) {
    const max = opts.maxMessages ?? 100_000;
    if (!(Number.isSafeInteger(max) && max >= 1)) throw new Error(`maxMessages must be an integer >= 1, got ${max}`);
    this.log = new Log(max);
    this.duplicateWindowMs = opts.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
    this.report = opts.onHandlerError ?? reportToStderr;
  }

  async publish(subject: string, data: Record<string, unknown>, opts?: { msgId?: string }): Promise<PublishResult> {
    if (this.closed) throw new Error('bus is closed');
    assertPublishSubject(subject);
    assertData(data);
    const json = JSON.stringify(data);
    const now = Date.now();
    for (const [id, s] of this.seen) {
      if (s.at > now - this.duplicateWindowMs) break; // insertion order is time order
      this.seen.delete(id);
    }
    const msgId = opts?.msgId;
    if (msgId) {
      const s = this.seen.get(msgId);
      if (s) return { seq: s.seq, duplicate: true };
    }
    const m = this.log.append(subject, json);
    if (msgId) this.seen.set(msgId, { seq: m.seq, at: now });
    for (const c of this.active) c.wake();
    return { seq: m.seq, duplicate: false };
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
        consumer = new Consumer(o.durable, this.log, o.subjects, o.ackWaitMs, o.maxInFlight, o.startSeq ?? this.log.lastSeq + 1);
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

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.workers].map((w) => w.close()));
  }
}
