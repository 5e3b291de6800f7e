import { describe, it, expect, afterAll } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MemoryBus } from '../../lib/bus/memory.ts';
import type { Delivery } from '../../lib/bus/port.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-busj-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const collect = (bus: MemoryBus, opts: Parameters<MemoryBus['subscribe']>[0], n: number) =>
  new Promise<Delivery[]>((resolve) => {
    const got: Delivery[] = [];
    void bus.subscribe(opts, (d) => {
      got.push(d);
      if (got.length === n) resolve(got);
    });
  });

describe('embedded bus journal', () => {
  it('keeps the log, de-duplication ids and durable positions across a restart', async () => {
    const a = new MemoryBus({ journalDir: dir });
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    for (let i = 1; i <= 5; i++) await a.publish('cog.test.x', { type: 't', i }, { msgId: `m${i}`, ...(i === 4 ? { traceparent: tp } : {}) });
    // A durable consumer acks the first three, then the process stops.
    const firstThree = await new Promise<number[]>((resolve) => {
      const seen: number[] = [];
      void a.subscribe({ subjects: ['cog.test.>'], durable: 'd1', startSeq: 1, maxInFlight: 1 }, async (d) => {
        if (seen.length < 3) seen.push(d.data.i as number);
        else await new Promise(() => {}); // never finishes: stays unacked
        if (seen.length === 3) resolve(seen);
      });
    });
    expect(firstThree).toEqual([1, 2, 3]);
    await new Promise((r) => setTimeout(r, 20));
    await a.close();

    const b = new MemoryBus({ journalDir: dir });
    expect(await b.lastSeq()).toBe(5);
    expect((await b.publish('cog.test.x', { type: 't', i: 1 }, { msgId: 'm1' })).duplicate).toBe(true);
    const replay = await collect(b, { subjects: ['cog.test.x'], startSeq: 2 }, 4);
    expect(replay.map((d) => d.seq)).toEqual([2, 3, 4, 5]);
    expect(replay.map((d) => d.traceparent)).toEqual([undefined, undefined, tp, undefined]); // the trace context survives too
    const resumed = await collect(b, { subjects: ['cog.test.>'], durable: 'd1' }, 2);
    expect(resumed.map((d) => d.data.i)).toEqual([4, 5]);
    const next = await b.publish('cog.test.x', { type: 't', i: 6 });
    expect(next.seq).toBe(6);
    await b.close();
  });

  it('journals a publishMany in one write, and what it published before a refusal', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-busj-many-'));
    const a = new MemoryBus({ journalDir: d });
    const writes: number[] = [];
    const real = fs.writeSync;
    const spy = ((fd: number, ...rest: unknown[]) => {
      writes.push(fd);
      return (real as (...x: unknown[]) => number)(fd, ...rest);
    }) as typeof fs.writeSync;
    fs.writeSync = spy;
    try {
      await a.publishMany(Array.from({ length: 9 }, (_, i) => ({ subject: 'cog.test.many', data: { type: 't', i }, msgId: `many-${i}` })));
      expect(writes).toHaveLength(1);
      await expect(
        a.publishMany([
          { subject: 'cog.test.many', data: { type: 't', i: 9 } },
          { subject: 'cog.test.*', data: { type: 't', i: 10 } },
        ]),
      ).rejects.toThrow(/invalid bus subject/);
      expect(writes).toHaveLength(2);
    } finally {
      fs.writeSync = real;
    }
    await a.close();
    const b = new MemoryBus({ journalDir: d });
    expect(await b.lastSeq()).toBe(10);
    const all = await collect(b, { subjects: ['cog.test.many'], startSeq: 1 }, 10);
    expect(all.map((m) => m.data.i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect((await b.publishMany([{ subject: 'cog.test.many', data: { type: 't', i: 0 }, msgId: 'many-0' }]))[0]!.duplicate).toBe(true);
    await b.close();
    fs.rmSync(d, { recursive: true, force: true });
  });

  it('rolls over into segments and deletes the oldest once the rest hold the retention; nothing is rewritten', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-busj-seg-'));
    // The journal of the single-file version: read as the oldest segment.
    fs.writeFileSync(
      path.join(d, 'bus.jsonl'),
      [1, 2, 3].map((seq) => JSON.stringify({ seq, subject: 'cog.test.x', ts: Date.now(), json: JSON.stringify({ type: 't', i: seq }) })).join('\n') + '\n',
    );
    const a = new MemoryBus({ journalDir: d, maxMessages: 4000 }); // segments of 1,000 lines
    expect(await a.lastSeq()).toBe(3);
    const segments = () =>
      fs
        .readdirSync(d)
        .filter((f) => f.endsWith('.jsonl'))
        .sort();
    const inodes = new Map<string, number>();
    for (let i = 4; i <= 6500; i++) {
      await a.publish('cog.test.x', { type: 't', i });
      // A closed segment is never written again (same inode, same size once closed).
      if (i % 500 === 0) for (const f of segments()) inodes.set(f, inodes.get(f) ?? fs.statSync(path.join(d, f)).ino);
    }
    await new Promise((r) => setTimeout(r, 50)); // the unlinks run off the event loop
    // 6,500 lines: the legacy file and the first two segments went once four newer ones held 4,000.
    expect(segments()).toEqual(['bus-00000003.jsonl', 'bus-00000004.jsonl', 'bus-00000005.jsonl', 'bus-00000006.jsonl', 'bus-00000007.jsonl']);
    for (const f of segments()) if (inodes.has(f)) expect(fs.statSync(path.join(d, f)).ino).toBe(inodes.get(f));
    const lines = segments().map((f) => fs.readFileSync(path.join(d, f), 'utf8').split('\n').filter(Boolean).length);
    expect(lines).toEqual([1000, 1000, 1000, 1000, 497]); // the first segment began at seq 4
    await a.close();

    // After a restart: the newest 4,000, in order, and publishing goes on in a new segment.
    const b = new MemoryBus({ journalDir: d, maxMessages: 4000 });
    expect(await b.lastSeq()).toBe(6500);
    const tail = await collect(b, { subjects: ['cog.test.x'], startSeq: 1 }, 4000);
    expect(tail[0].seq).toBe(2501);
    expect(tail.map((m) => m.data.i)).toEqual(Array.from({ length: 4000 }, (_, k) => 2501 + k));
    expect((await b.publish('cog.test.x', { type: 't', i: 6501 })).seq).toBe(6501);
    expect(segments().at(-1)).toBe('bus-00000008.jsonl');
    await b.close();
    fs.rmSync(d, { recursive: true, force: true });
  });

  it('writes a payload as the JSON it is, reads lines of both forms back, and drops a torn last line', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-busj-form-'));
    // A segment of the older form (the payload as a JSON string), then the payloads whose text
    // could fool a reader that looks for the payload's key: in a message id, and in the payload.
    fs.writeFileSync(
      path.join(d, 'bus-00000001.jsonl'),
      `${JSON.stringify({ seq: 1, subject: 'cog.test.x', ts: Date.now(), json: JSON.stringify({ type: 't', i: 1 }), msgId: 'old' })}\n`,
    );
    const a = new MemoryBus({ journalDir: d });
    const tricky = { type: 't', i: 2, text: ',"data":{"no":1}} \n "quoted" \\ \u2028', nested: { data: [1, { data: null }] } };
    await a.publish('cog.test.x', tricky, { msgId: 'id,"data":{}' });
    await a.publish('cog.test.x', { type: 't', i: 3 });
    await a.close();
    const written = fs.readFileSync(path.join(d, 'bus-00000002.jsonl'), 'utf8');
    expect(written.split('\n')[0]).toBe(
      `{"seq":2,"subject":"cog.test.x","ts":${JSON.parse(written.split('\n')[0]!).ts},"msgId":"id,\\"data\\":{}","data":${JSON.stringify(tricky)}}`,
    );
    // A crash during the last append: the line is cut short, inside its payload.
    const cut = `{"seq":4,"subject":"cog.test.x","ts":1,"data":{"type":"t","i":4,"text":"cut`;
    fs.appendFileSync(path.join(d, 'bus-00000002.jsonl'), cut);

    const b = new MemoryBus({ journalDir: d });
    expect(await b.lastSeq()).toBe(3);
    const all = await collect(b, { subjects: ['cog.test.x'], startSeq: 1 }, 3);
    expect(all.map((m) => m.data)).toEqual([{ type: 't', i: 1 }, tricky, { type: 't', i: 3 }]);
    expect((await b.publish('cog.test.x', { type: 't', i: 2 }, { msgId: 'id,"data":{}' })).duplicate).toBe(true);
    expect((await b.publish('cog.test.x', { type: 't', i: 1 }, { msgId: 'old' })).duplicate).toBe(true);
    await b.close();
    fs.rmSync(d, { recursive: true, force: true });
  });
});
