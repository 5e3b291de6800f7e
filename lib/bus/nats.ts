// The bus over NATS JetStream: one stream holding `<prefix>.>`, publishes with Nats-Msg-Id for
// de-duplication, pull consumers with explicit acks for every subscription (durable or ephemeral),
// so ack/nak/ackWait/maxInFlight mean the same as in the memory adapter.
import { connect, headers as natsHeaders, nanos, errors as natsErrors, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstreamManager,
  type Consumer,
  type ConsumerConfig,
  type ConsumerInfo,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { Bus, Delivery, PublishInput, PublishResult, SubscribeOptions, Subscription } from './port.ts';
import { subjectMatches } from './port.ts';
import { unavailable } from '../errors.ts';

/** The trace context travels as a message header, as W3C trace-context does over HTTP. */
function traceHeaders(traceparent: string) {
  const h = natsHeaders();
  h.set('traceparent', traceparent);
  return h;
}
import {
  DEFAULT_DUPLICATE_WINDOW_MS,
  type HandlerErrorReporter,
  type NormalizedSubscribe,
  assertData,
  assertPublishSubject,
  makeDelivery,
  normalizeSubscribe,
  reportToStderr,
  runHandler,
} from './common.ts';

export interface NatsBusOptions {
  /** One URL or a comma-separated list, e.g. `nats://127.0.0.1:4222`. */
  servers: string;
  /** Stream name. Default `COG`. */
  stream?: string;
  /** Wire prefix replacing `cog` (tests use one to stay apart from a running platform). Default `cog`. */
  subjectPrefix?: string;
  /** A publish not acknowledged by JetStream within this time rejects. Default 5 s. */
  publishTimeoutMs?: number;
  /** Stream retention bounds. Defaults: 1 000 000 messages, 7 days. */
  maxMsgs?: number;
  maxAgeMs?: number;
  /** Connection name shown by the server. */
  name?: string;
  onHandlerError?: HandlerErrorReporter;
}

/** Ephemeral consumers outlive a vanished client this long, then the server removes them. */
const EPHEMERAL_INACTIVE_MS = 10 * 60_000;
const PREFIX = /^[A-Za-z0-9_-]+$/;
const STREAM = /^[A-Za-z0-9_-]+$/;

const isApiError = (err: unknown, code: number) => err instanceof JetStreamApiError && err.code === code;

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** True when some subject matches both NATS filters. */
function filtersOverlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; ; i++) {
    if (i === x.length || i === y.length) return i === x.length && i === y.length;
    if (x[i] === '>' || y[i] === '>') return true;
    if (x[i] !== '*' && y[i] !== '*' && x[i] !== y[i]) return false;
  }
}

/**
 * The narrowest single filter that covers all of these: their common leading literal tokens, then
 * `>` (`p.sleeve.spawned.>` and `p.sleeve.changed.>` -> `p.sleeve.>`); undefined when they share
 * no token that `>` could follow.
 */
function coveringFilter(filters: string[]): string | undefined {
  const tokens = filters.map((f) => f.split('.'));
  let n = 0;
  // A token joins the common part when every filter has it, literal, and has more after it.
  while (tokens.every((t) => n + 1 < t.length && t[n] !== '*' && t[n] !== '>' && t[n] === tokens[0][n])) n++;
  return n ? [...tokens[0].slice(0, n), '>'].join('.') : undefined;
}

export class NatsBus implements Bus {
  private readonly subs = new Set<NatsSubscription>();
  private closed = false;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly stream: string,
    readonly prefix: string,
    private readonly publishTimeoutMs: number,
    private readonly report: HandlerErrorReporter,
  ) {}

  /** Connects (retrying reconnects forever afterwards) and ensures the stream exists. */
  static async connect(opts: NatsBusOptions): Promise<NatsBus> {
    const stream = opts.stream ?? 'COG';
    const prefix = opts.subjectPrefix ?? 'cog';
    if (!STREAM.test(stream)) throw new Error(`invalid stream name ${JSON.stringify(stream)}`);
    if (!PREFIX.test(prefix)) throw new Error(`invalid subject prefix ${JSON.stringify(prefix)}`);
    const servers = opts.servers
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    let nc: NatsConnection;
    try {
      // noAsyncTraces: the client otherwise builds two Errors (their stack traces) for every
      // request, a JetStream publish included, to say where a timeout began; the bus's own errors
      // name the subject and the reason.
      nc = await connect({ servers, name: opts.name ?? 'cog', maxReconnectAttempts: -1, reconnectTimeWait: 1000, noAsyncTraces: true });
    } catch (err) {
      throw new Error(`cannot connect to NATS at ${servers.join(',')}: ${errText(err)}`);
    }
    try {
      const jsm = await jetstreamManager(nc, { timeout: 5_000 });
      await ensureStream(jsm, stream, prefix, opts.maxMsgs ?? 1_000_000, opts.maxAgeMs ?? 7 * 24 * 3_600_000);
      return new NatsBus(nc, jsm.jetstream(), jsm, stream, prefix, opts.publishTimeoutMs ?? 5_000, opts.onHandlerError ?? reportToStderr);
    } catch (err) {
      await nc.close().catch(() => {});
      throw err;
    }
  }

  /** `cog.x.y` -> `<prefix>.x.y`; filters with a leading wildcard stay inside the prefix. */
  toWire(subject: string): string {
    if (subject === '>') return `${this.prefix}.>`;
    const dot = subject.indexOf('.');
    return dot < 0 ? this.prefix : this.prefix + subject.slice(dot);
  }

  fromWire(subject: string): string {
    return 'cog' + subject.slice(this.prefix.length);
  }

  async publish(subject: string, data: Record<string, unknown>, opts?: { msgId?: string; traceparent?: string }): Promise<PublishResult> {
    if (this.closed) throw new Error('bus is closed');
    assertPublishSubject(subject);
    assertData(data);
    const payload = JSON.stringify(data);
    try {
      const ack = await this.js.publish(this.toWire(subject), payload, {
        timeout: this.publishTimeoutMs,
        ...(opts?.msgId ? { msgID: opts.msgId } : {}),
        ...(opts?.traceparent ? { headers: traceHeaders(opts.traceparent) } : {}),
      });
      return { seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      if (err instanceof natsErrors.InvalidArgumentError) throw new Error(`bus publish to ${subject} refused: ${errText(err)}`);
      const why = err instanceof natsErrors.TimeoutError ? `no acknowledgement within ${this.publishTimeoutMs} ms` : errText(err);
      throw unavailable(`event bus unavailable: publish to ${subject} failed (${why})`);
    }
  }

  /** One after another: JetStream stores each before the next goes, so the order holds even when one fails. */
  async publishMany(msgs: readonly PublishInput[]): Promise<PublishResult[]> {
    const out: PublishResult[] = [];
    for (const m of msgs) out.push(await this.publish(m.subject, m.data, { msgId: m.msgId, traceparent: m.traceparent }));
    return out;
  }

  async subscribe(opts: SubscribeOptions, handler: (d: Delivery) => void | Promise<void>): Promise<Subscription> {
    if (this.closed) throw new Error('bus is closed');
    const o = normalizeSubscribe(opts);
    const { filter, clientFilter } = this.filterConfig(o.subjects);
    const name = o.durable ? await this.ensureDurable(o, filter) : await this.createEphemeral(o, filter);
    const sub = new NatsSubscription(this, this.nc, this.jsm, name, !o.durable, o, clientFilter, handler, this.report, (s) => this.subs.delete(s));
    this.subs.add(sub);
    try {
      const consumer = await this.js.consumers.get(this.stream, name);
      await sub.start(consumer);
    } catch (err) {
      await sub.close().catch(() => {});
      throw err;
    }
    return sub;
  }

  /**
   * One filter goes to the server as is. Several go as filter_subjects on servers >= 2.10 when they
   * do not overlap; otherwise the consumer takes the whole prefix and the client filters (and acks
   * what it skips).
   */
  private filterConfig(subjects: string[]): { filter: Partial<ConsumerConfig>; clientFilter: string[] | null } {
    const wire = subjects.map((s) => this.toWire(s));
    if (wire.includes(`${this.prefix}.>`)) return { filter: { filter_subject: `${this.prefix}.>` }, clientFilter: null };
    if (wire.length === 1) return { filter: { filter_subject: wire[0] }, clientFilter: null };
    const overlap = wire.some((a, i) => wire.some((b, j) => j > i && filtersOverlap(a, b)));
    if (!overlap && serverAtLeast(this.nc, 2, 10)) return { filter: { filter_subjects: wire }, clientFilter: null };
    // The server sends what covers them all, the client keeps what matches. The whole stream would
    // do, but then every consumer of a few subjects gets (and acks) every event: on a 2.9 server
    // the two sleeve runtimes took every perceive's event to drop it.
    return { filter: { filter_subject: coveringFilter(wire) ?? `${this.prefix}.>` }, clientFilter: subjects };
  }

  private startPolicy(o: NormalizedSubscribe): Partial<ConsumerConfig> {
    return o.startSeq !== undefined ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: o.startSeq } : { deliver_policy: DeliverPolicy.New };
  }

  private async ensureDurable(o: NormalizedSubscribe, filter: Partial<ConsumerConfig>): Promise<string> {
    const name = o.durable!;
    let info: ConsumerInfo | null = null;
    try {
      info = await this.jsm.consumers.info(this.stream, name);
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    const settings = { ack_wait: nanos(o.ackWaitMs), max_ack_pending: o.maxInFlight, ...filter };
    if (!info) {
      await this.jsm.consumers.add(this.stream, {
        durable_name: name,
        ack_policy: AckPolicy.Explicit,
        max_deliver: -1,
        ...this.startPolicy(o),
        ...settings,
      });
      return name;
    }
    // An existing durable keeps its position (startSeq is ignored); its settings follow the caller.
    const c = info.config;
    const same =
      c.ack_wait === settings.ack_wait &&
      c.max_ack_pending === settings.max_ack_pending &&
      (c.filter_subject ?? '') === (settings.filter_subject ?? '') &&
      JSON.stringify(c.filter_subjects ?? []) === JSON.stringify(settings.filter_subjects ?? []);
    if (!same) {
      try {
        await this.jsm.consumers.update(this.stream, name, {
          ack_wait: settings.ack_wait,
          max_ack_pending: settings.max_ack_pending,
          ...(settings.filter_subjects ? { filter_subjects: settings.filter_subjects } : { filter_subject: settings.filter_subject }),
        });
      } catch (err) {
        throw new Error(`durable consumer ${name} exists with settings that cannot be changed: ${errText(err)}`);
      }
    }
    return name;
  }

  private async createEphemeral(o: NormalizedSubscribe, filter: Partial<ConsumerConfig>): Promise<string> {
    const ci = await this.jsm.consumers.add(this.stream, {
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(o.ackWaitMs),
      max_ack_pending: o.maxInFlight,
      max_deliver: -1,
      inactive_threshold: nanos(EPHEMERAL_INACTIVE_MS),
      ...this.startPolicy(o),
      ...filter,
    });
    return ci.name;
  }

  async lastSeq(): Promise<number> {
    const info = await this.jsm.streams.info(this.stream);
    return info.state.last_seq;
  }

  async consumerLag(): Promise<Array<{ consumer: string; pending: number }>> {
    const durables = [...new Set([...this.subs].filter((s) => !s.ephemeral).map((s) => s.name))];
    return Promise.all(
      durables.map(async (name) => {
        const ci = await this.jsm.consumers.info(this.stream, name);
        return { consumer: name, pending: ci.num_pending + ci.num_ack_pending };
      }),
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subs].map((s) => s.close().catch(() => {})));
    if (this.nc.isClosed()) return;
    // drain() waits for the server; during an outage give up after a while and just close.
    if (!(await within(this.nc.drain(), 3_000))) await this.nc.close().catch(() => {});
  }
}

function serverAtLeast(nc: NatsConnection, major: number, minor: number): boolean {
  const [a, b] = (nc.info?.version ?? '0.0.0').split('.').map((n) => parseInt(n, 10));
  return a > major || (a === major && b >= minor);
}

async function ensureStream(jsm: JetStreamManager, name: string, prefix: string, maxMsgs: number, maxAgeMs: number) {
  const subject = `${prefix}.>`;
  const check = (subjects: string[] | undefined) => {
    if (!subjects?.includes(subject)) {
      throw new Error(`NATS stream ${name} exists but does not hold ${subject} (subjects: ${(subjects ?? []).join(', ')})`);
    }
  };
  try {
    check((await jsm.streams.info(name)).config.subjects);
    return;
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
  }
  try {
    await jsm.streams.add({
      name,
      subjects: [subject],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_msgs: maxMsgs,
      max_age: nanos(maxAgeMs),
      duplicate_window: nanos(DEFAULT_DUPLICATE_WINDOW_MS),
      num_replicas: 1,
    });
  } catch (err) {
    // Another process may have created it first.
    try {
      check((await jsm.streams.info(name)).config.subjects);
    } catch {
      throw new Error(`cannot create NATS stream ${name} for ${subject}: ${errText(err)}`);
    }
  }
}

/**
 * One pull subscription. Messages arrive through a callback into a local queue that a single loop
 * hands to the handler in order. Queued messages get progress acks so they do not time out while
 * they wait, and are nak'ed on close so a durable's next subscriber gets them at once instead of
 * after ackWait.
 */
class NatsSubscription implements Subscription {
  private queue: JsMsg[] = [];
  private closed = false;
  private closing?: Promise<void>;
  private wake?: () => void;
  private messages?: ConsumerMessages;
  private keepAlive?: NodeJS.Timeout;

  constructor(
    private readonly bus: NatsBus,
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    readonly name: string,
    readonly ephemeral: boolean,
    private readonly o: NormalizedSubscribe,
    private readonly clientFilter: string[] | null,
    private readonly handler: (d: Delivery) => void | Promise<void>,
    private readonly report: HandlerErrorReporter,
    private readonly onClose: (s: NatsSubscription) => void,
  ) {}

  async start(consumer: Consumer): Promise<void> {
    this.messages = await consumer.consume({
      max_messages: Math.min(this.o.maxInFlight, 64),
      callback: (m) => this.onMessage(m),
    });
    this.keepAlive = setInterval(
      () => {
        for (const m of this.queue) safe(() => m.working());
      },
      Math.max(50, Math.floor(this.o.ackWaitMs / 2)),
    );
    this.keepAlive.unref();
    void this.run();
  }

  private onMessage(m: JsMsg): void {
    if (this.closed) {
      safe(() => m.nak());
      return;
    }
    if (this.clientFilter) {
      const subject = this.bus.fromWire(m.subject);
      if (!this.clientFilter.some((f) => subjectMatches(f, subject))) {
        safe(() => m.ack());
        return;
      }
    }
    this.queue.push(m);
    this.wake?.();
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      const m = this.queue.shift();
      if (!m) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      let data: Record<string, unknown>;
      try {
        data = m.json<Record<string, unknown>>();
      } catch (err) {
        safe(() => m.term()); // not JSON: no handler can ever take it
        const info = { subject: this.bus.fromWire(m.subject), seq: m.seq, deliveryCount: m.info.deliveryCount, consumer: this.name };
        safe(() => this.report(err, info));
        continue;
      }
      const traceparent = m.headers?.get('traceparent') || undefined;
      const event = {
        subject: this.bus.fromWire(m.subject),
        seq: m.seq,
        ts: Math.floor(m.info.timestampNanos / 1e6),
        data,
        ...(traceparent ? { traceparent } : {}),
      };
      const d = makeDelivery(
        event,
        m.info.deliveryCount,
        () => safe(() => m.ack()),
        (delay) => safe(() => m.nak(delay)),
      );
      await runHandler(this.handler, d, this.o.autoAck, this.report, this.name);
    }
  }

  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    this.closed = true;
    clearInterval(this.keepAlive);
    this.wake?.();
    await this.messages?.close().catch(() => {});
    // Before the naks the server must drop the pull request whose inbox just went away, or it
    // redelivers them into it (and they wait out ackWait). A consumer info makes it prune those.
    if (!this.ephemeral && this.queue.length && !this.nc.isClosed()) {
      await within(this.jsm.consumers.info(this.bus.stream, this.name), 2_000);
    }
    const left = this.queue;
    this.queue = [];
    if (!this.ephemeral) for (const m of left) safe(() => m.nak());
    if (!this.nc.isClosed()) {
      // Bounded: during an outage neither would answer. On failure the server drops an
      // ephemeral after its inactive threshold anyway.
      await within(this.nc.flush(), 2_000);
      if (this.ephemeral) await within(this.jsm.consumers.delete(this.bus.stream, this.name), 2_000);
    }
    this.onClose(this);
  }
}

/** Resolves true when `p` settles successfully within `ms`, false otherwise; never rejects. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([
      p.then(
        () => true,
        () => false,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Acks on a closed connection throw; the message is redelivered anyway. */
function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    // ignored: at-least-once covers it
  }
}
