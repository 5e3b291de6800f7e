// The event bus port. Subjects are `cog.<context>.<event>[.<stackId>]`; payloads are JSON objects
// `{type, ts, ...}`. Two adapters implement it with the same semantics: NATS JetStream (nats.ts)
// and in-process (memory.ts). One stream holds every `cog.>` subject.

export interface BusEvent {
  /** Subject, e.g. `cog.perceive.stack:human:1:abcdef012345`. */
  subject: string;
  /** Stream sequence, strictly increasing, starting at 1. */
  seq: number;
  /** Publish time, Unix ms. */
  ts: number;
  data: Record<string, unknown>;
  /** W3C traceparent of the publish, when it ran in a trace: the consumer's span continues it. */
  traceparent?: string;
}

export interface Delivery extends BusEvent {
  /** 1 on first delivery, more on redelivery. */
  deliveryCount: number;
  ack(): void;
  /** Ask for redelivery (optionally after a delay). */
  nak(delayMs?: number): void;
}

export interface PublishResult {
  seq: number;
  /** True when the message id was already seen within the de-duplication window. */
  duplicate: boolean;
}

/** One message of publishMany. */
export interface PublishInput {
  subject: string;
  data: Record<string, unknown>;
  msgId?: string;
  traceparent?: string;
}

export interface SubscribeOptions {
  /** Subject filters; NATS wildcards `*` (one token) and `>` (the rest). */
  subjects: string[];
  /**
   * Durable consumer name: its position survives restarts of the subscriber, messages not acked
   * are redelivered (at-least-once). Without a name the consumer is ephemeral.
   */
  durable?: string;
  /** Start at this stream sequence (inclusive). Default: only new messages (or the durable's position). */
  startSeq?: number;
  /** Redeliver an unacked message after this long (ms). Default 30 s. */
  ackWaitMs?: number;
  /** At most this many unacked messages in flight to the handler. Default 64. */
  maxInFlight?: number;
  /** Auto-ack after the handler resolves (default true). When false the handler must ack. */
  autoAck?: boolean;
}

export interface Subscription {
  /** Stops delivery and releases the consumer (an ephemeral consumer is deleted). */
  close(): Promise<void>;
}

export interface Bus {
  publish(subject: string, data: Record<string, unknown>, opts?: { msgId?: string; traceparent?: string }): Promise<PublishResult>;
  /**
   * Several messages, in order, each as publish would send it. A failure part way rejects, and the
   * messages before it stay published (a re-publish is de-duplicated by msgId). The in-process bus
   * journals the lot in one write: the event relay hands it a write batch's events at once.
   */
  publishMany(msgs: readonly PublishInput[]): Promise<PublishResult[]>;
  subscribe(opts: SubscribeOptions, handler: (d: Delivery) => void | Promise<void>): Promise<Subscription>;
  /** Highest sequence in the stream (0 when empty). */
  lastSeq(): Promise<number>;
  /** Each durable consumer this bus subscribed: messages matching it not yet acknowledged (metrics). */
  consumerLag?(): Promise<Array<{ consumer: string; pending: number }>>;
  close(): Promise<void>;
}

/** `cog.perceive.stack:…` -> `cog.perceive`: what a subject is, without ids (span names, labels). */
export const subjectKind = (subject: string): string => subject.split('.').slice(0, 2).join('.');

/**
 * True when `subject` matches the NATS-style `filter`. Token by token over the two strings, without
 * splitting them: every consumer runs it on every message it is woken for (the in-process bus under
 * the write load: a dozen consumers, thousands of events a second).
 */
export function subjectMatches(filter: string, subject: string): boolean {
  let f = 0; // start of the filter's current token
  let s = 0; // start of the subject's current token (subject.length + 1 once every token was read)
  for (;;) {
    let fe = filter.indexOf('.', f);
    if (fe < 0) fe = filter.length;
    if (fe - f === 1 && filter.charCodeAt(f) === 62 /* > */) return s <= subject.length; // one token or more left
    if (s > subject.length) return false; // the filter has a token the subject has not
    let se = subject.indexOf('.', s);
    if (se < 0) se = subject.length;
    const wild = fe - f === 1 && filter.charCodeAt(f) === 42; /* * */
    if (!wild) {
      if (fe - f !== se - s) return false;
      for (let k = 0; k < fe - f; k++) if (filter.charCodeAt(f + k) !== subject.charCodeAt(s + k)) return false;
    }
    f = fe + 1;
    s = se + 1;
    if (f > filter.length) return s > subject.length; // the filter's tokens are used up: so must the subject's be
  }
}
