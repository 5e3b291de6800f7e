// What both bus adapters share: defaults, validation of subjects and options, and the handler
// runner (auto-ack, errors as nak), so the two behave the same.
import { inSpan, SpanKind } from '../tracing.ts';
import { subjectKind, type BusEvent, type Delivery, type SubscribeOptions } from './port.ts';

export const DEFAULT_ACK_WAIT_MS = 30_000;
export const DEFAULT_MAX_IN_FLIGHT = 64;
export const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;

/** Called when a handler throws or rejects; the message is nak'ed. Never given the payload. */
export type HandlerErrorReporter = (err: unknown, info: { subject: string; seq: number; deliveryCount: number; consumer: string }) => void;

/** Default reporter: one JSON line on stderr with the error's name and (truncated) message only. */
export const reportToStderr: HandlerErrorReporter = (err, info) => {
  const e = err instanceof Error ? err : new Error(String(err));
  const line = {
    level: 'warn',
    time: Date.now(),
    msg: 'bus handler failed, message will be redelivered',
    ...info,
    err: { name: e.name, message: e.message.slice(0, 200) },
  };
  process.stderr.write(JSON.stringify(line) + '\n');
};

const TOKEN = /^[^\s.*>]+$/;
/** `cog` then one token or more, each without whitespace, `.`, `*` or `>`: one test a publish, no split. */
const PUBLISH_SUBJECT = /^cog(?:\.[^\s.*>]+)+$/;

/** Publish subjects are concrete `cog.<token>...` names. */
export function assertPublishSubject(subject: string): void {
  if (typeof subject !== 'string' || !PUBLISH_SUBJECT.test(subject)) {
    throw new Error(`invalid bus subject ${JSON.stringify(subject)}: expected cog.<token>[.<token>...] without wildcards`);
  }
}

/** Filters live inside `cog.>`: `>`, or `cog` (or `*`) then tokens; `*` a whole token, `>` last. */
export function assertFilter(filter: string): void {
  const tokens = typeof filter === 'string' ? filter.split('.') : [];
  const ok =
    (tokens.length >= 2 || filter === '>') &&
    ['cog', '*', '>'].includes(tokens[0]) &&
    tokens.every((t, i) => (t === '>' ? i === tokens.length - 1 : t === '*' || TOKEN.test(t)));
  if (!ok) throw new Error(`invalid bus subject filter ${JSON.stringify(filter)}`);
}

export function assertData(data: unknown): asserts data is Record<string, unknown> {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new Error('bus payload must be a JSON object');
  }
}

export interface NormalizedSubscribe {
  subjects: string[];
  durable?: string;
  startSeq?: number;
  ackWaitMs: number;
  maxInFlight: number;
  autoAck: boolean;
}

const DURABLE = /^[A-Za-z0-9_-]{1,128}$/;

export function normalizeSubscribe(opts: SubscribeOptions): NormalizedSubscribe {
  if (!opts || !Array.isArray(opts.subjects) || opts.subjects.length === 0) {
    throw new Error('subscribe needs at least one subject filter');
  }
  opts.subjects.forEach(assertFilter);
  if (opts.durable !== undefined && !DURABLE.test(opts.durable)) {
    throw new Error(`invalid durable name ${JSON.stringify(opts.durable)}: use [A-Za-z0-9_-], at most 128 characters`);
  }
  if (opts.startSeq !== undefined && !(Number.isSafeInteger(opts.startSeq) && opts.startSeq >= 1)) {
    throw new Error(`startSeq must be an integer >= 1, got ${opts.startSeq}`);
  }
  const ackWaitMs = opts.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  if (!(Number.isFinite(ackWaitMs) && ackWaitMs >= 1)) throw new Error(`ackWaitMs must be >= 1, got ${ackWaitMs}`);
  const maxInFlight = opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  if (!(Number.isSafeInteger(maxInFlight) && maxInFlight >= 1)) {
    throw new Error(`maxInFlight must be an integer >= 1, got ${maxInFlight}`);
  }
  return {
    subjects: [...new Set(opts.subjects)],
    durable: opts.durable,
    startSeq: opts.startSeq,
    ackWaitMs: Math.ceil(ackWaitMs),
    maxInFlight,
    autoAck: opts.autoAck ?? true,
  };
}

/** Delay before redelivering after a handler error, so a failing handler does not spin. */
export function errorBackoffMs(deliveryCount: number): number {
  return Math.min(100 * 2 ** Math.max(0, deliveryCount - 1), 5_000);
}

/**
 * Wraps ack/nak so only the first settlement counts (auto-ack after a manual nak is a no-op). The
 * delivery is `event` itself with them added: each bus makes the event for this one delivery, and a
 * spread copy that gains members is V8's slow path, 2.6 µs a delivery (docs/decisions.md).
 */
export function makeDelivery(
  event: BusEvent,
  deliveryCount: number,
  ack: () => void,
  nak: (delayMs?: number) => void,
): { delivery: Delivery; settled: () => boolean } {
  let done = false;
  const delivery: Delivery = Object.assign(event, {
    deliveryCount,
    ack() {
      if (done) return;
      done = true;
      ack();
    },
    nak(delayMs?: number) {
      if (done) return;
      done = true;
      nak(delayMs !== undefined && Number.isFinite(delayMs) && delayMs > 0 ? Math.ceil(delayMs) : undefined);
    },
  });
  return { delivery, settled: () => done };
}

/** Runs one handler call: auto-acks on success, naks with back-off on error; never throws. */
export async function runHandler(
  handler: (d: Delivery) => void | Promise<void>,
  d: { delivery: Delivery; settled: () => boolean },
  autoAck: boolean,
  report: HandlerErrorReporter,
  consumer: string,
): Promise<void> {
  try {
    // A message published in a trace is handled in a consumer span of that trace.
    const tp = d.delivery.traceparent;
    if (tp) {
      const kind = subjectKind(d.delivery.subject);
      await inSpan(
        `process ${kind}`,
        {
          kind: SpanKind.CONSUMER,
          traceparent: tp,
          attributes: { 'messaging.system': 'cog-bus', 'messaging.consumer.group.name': consumer, 'messaging.destination.name': kind },
        },
        () => handler(d.delivery),
      );
    } else await handler(d.delivery);
    if (autoAck && !d.settled()) d.delivery.ack();
  } catch (err) {
    if (!d.settled()) d.delivery.nak(errorBackoffMs(d.delivery.deliveryCount));
    try {
      report(err, { subject: d.delivery.subject, seq: d.delivery.seq, deliveryCount: d.delivery.deliveryCount, consumer });
    } catch {
      // a broken reporter must not take the consumer down
    }
  }
}
