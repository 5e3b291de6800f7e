// One contract for the Bus port, run against the in-process adapter and JetStream (local NATS,
// a stream and subject prefix of its own, deleted afterwards).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { Bus, Delivery, SubscribeOptions, Subscription } from '../../lib/bus/port.ts';
import { MemoryBus } from '../../lib/bus/memory.ts';
import { NatsBus } from '../../lib/bus/nats.ts';
import type { HandlerErrorReporter } from '../../lib/bus/common.ts';
import { isProblem } from '../../lib/errors.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const run = Math.random().toString(36).slice(2, 8);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

interface Harness {
  bus: Bus;
  errors: Parameters<HandlerErrorReporter>[];
  /** Consumer names on the server, when the adapter has a server to ask. */
  consumers?: () => Promise<string[]>;
  teardown(): Promise<void>;
}

const adapters: { name: string; setup: () => Promise<Harness> }[] = [
  {
    name: 'memory',
    async setup() {
      const errors: Harness['errors'] = [];
      const bus = new MemoryBus({ onHandlerError: (...a) => errors.push(a) });
      return { bus, errors, teardown: () => bus.close() };
    },
  },
  {
    name: 'nats',
    async setup() {
      const errors: Harness['errors'] = [];
      const stream = `T${run}`;
      const bus = await NatsBus.connect({
        servers: NATS_URL,
        stream,
        subjectPrefix: `t${run}`,
        onHandlerError: (...a) => errors.push(a),
      });
      const nc = await connect({ servers: NATS_URL });
      const jsm: JetStreamManager = await jetstreamManager(nc);
      const consumers = async () => (await jsm.consumers.list(stream).next()).map((c) => c.name);
      return {
        bus,
        errors,
        consumers,
        async teardown() {
          await bus.close();
          await jsm.streams.delete(stream).catch(() => {});
          await nc.close();
        },
      };
    },
  },
];

describe.each(adapters)('Bus contract: $name', ({ setup }) => {
  let h: Harness;
  let bus: Bus;
  const open: Subscription[] = [];

  beforeAll(async () => {
    h = await setup();
    bus = h.bus;
  });
  afterAll(async () => {
    await Promise.all(open.map((s) => s.close()));
    await h?.teardown();
  });

  /** Subscribes and records every delivery (acking per the options). */
  async function record(opts: SubscribeOptions, onDelivery?: (d: Delivery, all: Delivery[]) => void | Promise<void>) {
    const got: Delivery[] = [];
    const sub = await bus.subscribe(opts, async (d) => {
      got.push(d);
      await onDelivery?.(d, got);
    });
    open.push(sub);
    return { got, sub };
  }

  async function publishAll(subjects: string[], tag: string): Promise<number[]> {
    const seqs: number[] = [];
    for (let i = 0; i < subjects.length; i++) {
      seqs.push((await bus.publish(subjects[i], { type: tag, ts: Date.now(), i })).seq);
    }
    return seqs;
  }

  it('keeps one ordered log with strictly increasing sequences', async () => {
    const before = await bus.lastSeq();
    const subjects = ['cog.order.a', 'cog.order.b', 'cog.order.a', 'cog.order.c.d', 'cog.order.b'];
    const seqs = await publishAll(subjects, 'order');
    expect(seqs[0]).toBeGreaterThan(before);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]);
    expect(await bus.lastSeq()).toBe(seqs[seqs.length - 1]);

    const { got } = await record({ subjects: ['cog.order.>'], startSeq: seqs[0] });
    await waitFor(() => got.length >= 5, 5_000, 'five deliveries');
    expect(got.map((d) => d.seq)).toEqual(seqs);
    expect(got.map((d) => d.subject)).toEqual(subjects);
    expect(got.map((d) => d.data.i)).toEqual([0, 1, 2, 3, 4]);
    for (const d of got) {
      expect(d.deliveryCount).toBe(1);
      expect(Math.abs(d.ts - Date.now())).toBeLessThan(60_000);
    }
  });

  it('carries the trace context of a publish to its deliveries, and none when there is none', async () => {
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const first = await bus.publish('cog.traced.x', { type: 'traced', n: 1 }, { traceparent: tp });
    await bus.publish('cog.traced.x', { type: 'traced', n: 2 });
    const { got } = await record({ subjects: ['cog.traced.x'], startSeq: first.seq });
    await waitFor(() => got.length >= 2, 5_000, 'two deliveries');
    expect(got.map((d) => [d.data.n, d.traceparent])).toEqual([
      [1, tp],
      [2, undefined],
    ]);
  });

  it('de-duplicates publishes by message id', async () => {
    const id = `dup-${run}`;
    const first = await bus.publish('cog.dedup.x', { type: 'dedup', n: 1 }, { msgId: id });
    const again = await bus.publish('cog.dedup.x', { type: 'dedup', n: 2 }, { msgId: id });
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ seq: first.seq, duplicate: true });
    expect(await bus.lastSeq()).toBe(first.seq);
    const other = await bus.publish('cog.dedup.x', { type: 'dedup', n: 3 }, { msgId: `${id}-other` });
    expect(other.duplicate).toBe(false);
    expect(other.seq).toBeGreaterThan(first.seq);

    const { got } = await record({ subjects: ['cog.dedup.x'], startSeq: first.seq });
    await waitFor(() => got.length >= 2, 5_000, 'two deliveries');
    await sleep(100);
    expect(got.map((d) => d.data.n)).toEqual([1, 3]);
  });

  it('publishes several messages in order in one call, de-duplicated like publish', async () => {
    const id = `many-${run}`;
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const rs = await bus.publishMany([
      { subject: 'cog.many.a', data: { type: 'many', n: 1 }, msgId: `${id}-1` },
      { subject: 'cog.many.b', data: { type: 'many', n: 2 }, msgId: `${id}-2`, traceparent: tp },
      { subject: 'cog.many.a', data: { type: 'many', n: 3 }, msgId: `${id}-1` }, // a copy of the first
      { subject: 'cog.many.a', data: { type: 'many', n: 4 } },
    ]);
    expect(rs.map((r) => r.duplicate)).toEqual([false, false, true, false]);
    expect(rs[1]!.seq).toBe(rs[0]!.seq + 1);
    expect(rs[2]!.seq).toBe(rs[0]!.seq);
    expect(rs[3]!.seq).toBe(rs[1]!.seq + 1);
    expect(await bus.lastSeq()).toBe(rs[3]!.seq);
    expect(await bus.publishMany([])).toEqual([]);
    const { got } = await record({ subjects: ['cog.many.>'], startSeq: rs[0]!.seq });
    await waitFor(() => got.length >= 3, 5_000, 'three deliveries');
    await sleep(100);
    expect(got.map((d) => [d.subject, d.data.n, d.traceparent])).toEqual([
      ['cog.many.a', 1, undefined],
      ['cog.many.b', 2, tp],
      ['cog.many.a', 4, undefined],
    ]);
  });

  it('publishMany stops at a message it refuses; the ones before it stay published', async () => {
    const before = await bus.lastSeq();
    await expect(
      bus.publishMany([
        { subject: 'cog.manybad.a', data: { type: 'manybad', n: 1 } },
        { subject: 'cog..bad', data: { type: 'manybad', n: 2 } },
        { subject: 'cog.manybad.a', data: { type: 'manybad', n: 3 } },
      ]),
    ).rejects.toThrow(/invalid bus subject/);
    expect(await bus.lastSeq()).toBe(before + 1);
    const { got } = await record({ subjects: ['cog.manybad.>'], startSeq: before + 1 });
    await waitFor(() => got.length >= 1, 5_000, 'one delivery');
    await sleep(100);
    expect(got.map((d) => d.data.n)).toEqual([1]);
  });

  it('filters with * and > wildcards, one filter or several', async () => {
    const subjects = ['cog.wild.a.x', 'cog.wild.a.x.y', 'cog.wild.b.x.y', 'cog.wild.c.x', 'cog.wild.b', 'cog.wild.a.end'];
    const seqs = await publishAll(subjects, 'wild');
    const many = await record({ subjects: ['cog.wild.a.*', 'cog.wild.b.>'], startSeq: seqs[0] });
    const one = await record({ subjects: ['cog.wild.*.x'], startSeq: seqs[0] });
    const overlapping = await record({ subjects: ['cog.wild.>', 'cog.wild.a.*'], startSeq: seqs[0] });
    await waitFor(() => many.got.some((d) => d.subject === 'cog.wild.a.end'), 5_000, 'sentinel');
    await waitFor(() => one.got.length >= 2 && overlapping.got.length >= 6, 5_000, 'filtered deliveries');
    await sleep(100);
    expect(many.got.map((d) => d.subject)).toEqual(['cog.wild.a.x', 'cog.wild.b.x.y', 'cog.wild.a.end']);
    expect(one.got.map((d) => d.subject)).toEqual(['cog.wild.a.x', 'cog.wild.c.x']);
    // A message matching two filters is delivered once.
    expect(overlapping.got.map((d) => d.seq)).toEqual(seqs);
  });

  it('replays from startSeq, and without it delivers only new messages', async () => {
    const seqs = await publishAll(['cog.replay.x', 'cog.replay.x', 'cog.replay.x', 'cog.replay.x'], 'replay');
    const from = await record({ subjects: ['cog.replay.x'], startSeq: seqs[2] });
    const fresh = await record({ subjects: ['cog.replay.x'] });
    await waitFor(() => from.got.length >= 2, 5_000, 'replay');
    const next = await bus.publish('cog.replay.x', { type: 'replay', i: 99 });
    await waitFor(() => fresh.got.length >= 1 && from.got.length >= 3, 5_000, 'new message');
    await sleep(100);
    expect(from.got.map((d) => d.seq)).toEqual([seqs[2], seqs[3], next.seq]);
    expect(fresh.got.map((d) => d.seq)).toEqual([next.seq]);
  });

  it('resumes a durable after close without loss and without redelivering acked messages', async () => {
    const durable = `resume_${run}`;
    const seqs = await publishAll(['cog.durable.x', 'cog.durable.x', 'cog.durable.x'], 'durable');
    const a = await record({ subjects: ['cog.durable.x'], durable, startSeq: seqs[0], ackWaitMs: 500 });
    await waitFor(() => a.got.length >= 3, 5_000, 'first batch');
    await a.sub.close();
    const later = await publishAll(['cog.durable.x', 'cog.durable.x', 'cog.durable.x'], 'durable');
    const b = await record({ subjects: ['cog.durable.x'], durable, ackWaitMs: 500 });
    await waitFor(() => b.got.length >= 3, 5_000, 'second batch');
    await sleep(700); // past ackWait: nothing acked comes back
    expect(a.got.map((d) => d.seq)).toEqual(seqs);
    expect(b.got.map((d) => d.seq)).toEqual(later);
    await b.sub.close();
    if (h.consumers) expect(await h.consumers()).toContain(durable); // a durable outlives its subscriber
  });

  it('hands messages not yet handled to the next subscriber of a durable at once', async () => {
    const durable = `handoff_${run}`;
    const seqs = await publishAll(Array(10).fill('cog.handoff.x'), 'handoff');
    const a = await record({ subjects: ['cog.handoff.x'], durable, startSeq: seqs[0], ackWaitMs: 20_000 }, () => sleep(30));
    await waitFor(() => a.got.length >= 2, 5_000, 'two handled');
    await a.sub.close();
    const handledByA = new Set(a.got.map((d) => d.seq));
    const b = await record({ subjects: ['cog.handoff.x'], durable, ackWaitMs: 20_000 });
    // Far sooner than ackWait: what A had not handled comes straight back.
    await waitFor(() => seqs.every((s) => handledByA.has(s) || b.got.some((d) => d.seq === s)), 5_000, 'hand-off');
    const bSeqs = b.got.map((d) => d.seq);
    expect([...new Set(bSeqs)]).toEqual(bSeqs);
    expect(bSeqs).toEqual([...bSeqs].sort((x, y) => x - y));
  });

  it('redelivers an unacked message after ackWait', async () => {
    const t0 = Date.now();
    const times: number[] = [];
    const { got } = await record({ subjects: ['cog.ackwait.x'], ackWaitMs: 500, autoAck: false }, (d) => {
      times.push(Date.now());
      if (d.deliveryCount >= 2) d.ack();
    });
    const { seq } = await bus.publish('cog.ackwait.x', { type: 'ackwait' });
    await waitFor(() => got.length >= 2, 5_000, 'redelivery');
    await sleep(700);
    expect(got.map((d) => [d.seq, d.deliveryCount])).toEqual([
      [seq, 1],
      [seq, 2],
    ]);
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(400);
    expect(times[1] - t0).toBeLessThan(3_000);
  });

  it('redelivers on nak, at once or after the given delay', async () => {
    const times: number[] = [];
    const { got } = await record({ subjects: ['cog.nak.x'], ackWaitMs: 20_000, autoAck: false }, (d) => {
      times.push(Date.now());
      if (d.deliveryCount === 1) d.nak();
      else if (d.deliveryCount === 2) d.nak(300);
      else d.ack();
    });
    await bus.publish('cog.nak.x', { type: 'nak' });
    await waitFor(() => got.length >= 3, 5_000, 'three deliveries');
    expect(got.map((d) => d.deliveryCount)).toEqual([1, 2, 3]);
    expect(times[1] - times[0]).toBeLessThan(1_000);
    expect(times[2] - times[1]).toBeGreaterThanOrEqual(250);
    expect(times[2] - times[1]).toBeLessThan(3_000);
  });

  it('treats a throwing handler as a nak and keeps running', async () => {
    const { got } = await record({ subjects: ['cog.throw.x'], ackWaitMs: 20_000 }, (d) => {
      if (d.deliveryCount === 1) throw new Error('handler failed');
    });
    const { seq } = await bus.publish('cog.throw.x', { type: 'throw', secret: 'do-not-log' });
    await waitFor(() => got.length >= 2, 5_000, 'redelivery after error');
    const next = await bus.publish('cog.throw.x', { type: 'throw' });
    await waitFor(() => got.some((d) => d.seq === next.seq), 5_000, 'next message');
    expect(got.slice(0, 2).map((d) => [d.seq, d.deliveryCount])).toEqual([
      [seq, 1],
      [seq, 2],
    ]);
    const report = h.errors.find(([, info]) => info.seq === seq);
    expect(report?.[1]).toMatchObject({ subject: 'cog.throw.x', seq, deliveryCount: 1 });
    expect(JSON.stringify(report?.[1])).not.toContain('do-not-log');
  });

  it('bounds unacked deliveries with maxInFlight', async () => {
    const { got } = await record({ subjects: ['cog.inflight.x'], maxInFlight: 2, ackWaitMs: 20_000, autoAck: false });
    const seqs = await publishAll(Array(5).fill('cog.inflight.x'), 'inflight');
    await waitFor(() => got.length >= 2, 5_000, 'two in flight');
    await sleep(300);
    expect(got.map((d) => d.seq)).toEqual(seqs.slice(0, 2));
    got[0].ack();
    await waitFor(() => got.length >= 3, 5_000, 'third after an ack');
    await sleep(200);
    expect(got).toHaveLength(3);
    for (let i = 1; i < 5; i++) {
      await waitFor(() => got.length > i, 5_000, `delivery ${i + 1}`);
      got[i].ack();
    }
    expect(got.map((d) => d.seq)).toEqual(seqs);
  });

  it('close stops delivery and releases the consumer', async () => {
    const before = h.consumers ? await h.consumers() : [];
    const { got, sub } = await record({ subjects: ['cog.close.x'] });
    if (h.consumers) expect((await h.consumers()).length).toBe(before.length + 1);
    await bus.publish('cog.close.x', { type: 'close' });
    await waitFor(() => got.length === 1, 5_000, 'first');
    await sub.close();
    await sub.close(); // idempotent
    await bus.publish('cog.close.x', { type: 'close' });
    await sleep(300);
    expect(got).toHaveLength(1);
    if (h.consumers) expect((await h.consumers()).sort()).toEqual([...before].sort());
  });

  it('refuses bad subjects, payloads and options', async () => {
    await expect(bus.publish('other.x', { type: 'x' })).rejects.toThrow(/invalid bus subject/);
    await expect(bus.publish('cog.a.*', { type: 'x' })).rejects.toThrow(/invalid bus subject/);
    await expect(bus.publish('cog..a', { type: 'x' })).rejects.toThrow(/invalid bus subject/);
    await expect(bus.publish('cog.a', [] as never)).rejects.toThrow(/JSON object/);
    await expect(bus.subscribe({ subjects: [] }, () => {})).rejects.toThrow(/subject filter/);
    await expect(bus.subscribe({ subjects: ['cog.>.x'] }, () => {})).rejects.toThrow(/filter/);
    await expect(bus.subscribe({ subjects: ['cog'] }, () => {})).rejects.toThrow(/filter/);
    await expect(bus.subscribe({ subjects: ['other.>'] }, () => {})).rejects.toThrow(/filter/);
    await expect(bus.subscribe({ subjects: ['cog.x'], durable: 'a.b' }, () => {})).rejects.toThrow(/durable/);
    await expect(bus.subscribe({ subjects: ['cog.x'], startSeq: 0 }, () => {})).rejects.toThrow(/startSeq/);
  });
});

describe('NatsBus filters', () => {
  it('sends a consumer of several subjects only what they cover, whatever the server version', async () => {
    // Before NATS 2.10 a consumer has one filter: several go as their covering filter and the client
    // keeps what matches; the whole stream would send each such consumer every event.
    const stream = `TF${run}`;
    const bus = await NatsBus.connect({ servers: NATS_URL, stream, subjectPrefix: `tf${run}` });
    const nc = await connect({ servers: NATS_URL });
    const jsm = await jetstreamManager(nc);
    try {
      const got: string[] = [];
      const sub = await bus.subscribe({ subjects: ['cog.sleeve.spawned.>', 'cog.sleeve.changed.>'] }, (d) => void got.push(d.subject));
      for (let i = 0; i < 20; i++) await bus.publish(`cog.perceive.s${i}`, { type: 'perceive', i });
      await bus.publish('cog.sleeve.synced.s1', { type: 'sleeve.synced' });
      await bus.publish('cog.sleeve.changed.s1', { type: 'sleeve.changed' });
      await bus.publish('cog.sleeve.spawned.s2', { type: 'sleeve.spawned' });
      await waitFor(() => got.length >= 2, 5_000, 'two deliveries');
      await sleep(100);
      expect(got).toEqual(['cog.sleeve.changed.s1', 'cog.sleeve.spawned.s2']);
      const [info] = await jsm.consumers.list(stream).next();
      // The server sent the sleeve events (the synced one the client dropped), none of the perceives.
      expect(info.delivered.consumer_seq).toBeLessThanOrEqual(3);
      await sub.close();
    } finally {
      await bus.close();
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close();
    }
  });
});

describe('MemoryBus specifics', () => {
  it('keeps only the last maxMessages; an older startSeq starts at the oldest kept', async () => {
    const bus = new MemoryBus({ maxMessages: 10 });
    for (let i = 1; i <= 15; i++) await bus.publish('cog.keep.x', { type: 'keep', i });
    expect(await bus.lastSeq()).toBe(15);
    const got: number[] = [];
    await bus.subscribe({ subjects: ['cog.keep.x'], startSeq: 1 }, (d) => void got.push(d.seq));
    await waitFor(() => got.length >= 10);
    await sleep(50);
    expect(got).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    await bus.close();
    await expect(bus.publish('cog.keep.x', { type: 'keep' })).rejects.toThrow(/closed/);
  });

  it('forgets message ids after the de-duplication window', async () => {
    // A window a loaded machine does not outlast between two publishes; the sleep outlasts it.
    const bus = new MemoryBus({ duplicateWindowMs: 500 });
    const a = await bus.publish('cog.win.x', { type: 'win' }, { msgId: 'm' });
    expect((await bus.publish('cog.win.x', { type: 'win' }, { msgId: 'm' })).duplicate).toBe(true);
    await sleep(600);
    const b = await bus.publish('cog.win.x', { type: 'win' }, { msgId: 'm' });
    expect(b).toEqual({ seq: a.seq + 1, duplicate: false });
    await bus.close();
  });

  it('gives every delivery its own copy of the payload', async () => {
    const bus = new MemoryBus();
    const seen: unknown[] = [];
    const mutate = (d: Delivery) => {
      seen.push(d.data.n);
      d.data.n = 'changed';
    };
    await bus.subscribe({ subjects: ['cog.copy.x'] }, mutate);
    await bus.subscribe({ subjects: ['cog.copy.x'] }, mutate);
    const payload = { type: 'copy', n: 1 };
    await bus.publish('cog.copy.x', payload);
    payload.n = 2;
    await waitFor(() => seen.length >= 2);
    expect(seen).toEqual([1, 1]);
    await bus.close();
  });
});

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

describe('NatsBus during an outage', () => {
  let server: ChildProcess | undefined;
  let dir = '';
  afterAll(() => {
    server?.kill('SIGKILL');
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('rejects a publish with a clear, retryable error instead of hanging', async () => {
    const port = await freePort();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-nats-'));
    const bin = fs.existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server';
    server = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    let bus: NatsBus | undefined;
    const end = Date.now() + 10_000;
    while (!bus) {
      try {
        bus = await NatsBus.connect({ servers: `127.0.0.1:${port}`, publishTimeoutMs: 500 });
      } catch (err) {
        if (Date.now() > end) throw err;
        await sleep(100);
      }
    }
    expect((await bus.publish('cog.outage.x', { type: 'outage' })).seq).toBe(1);
    server.kill('SIGKILL');
    await new Promise((r) => server!.once('exit', r));
    const t0 = Date.now();
    const err = await bus.publish('cog.outage.x', { type: 'outage' }).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(isProblem(err) && err.status).toBe(503);
    expect((err as Error).message).toMatch(/event bus unavailable: publish to cog.outage.x failed/);
    await bus.close();
  }, 20_000);
});
