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
});
