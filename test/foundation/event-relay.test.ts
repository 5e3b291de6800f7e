// The event relay (lib/events.ts): outbox rows published in order over several batches (each
// batch deleted by the statement that reads the next), and a publish that fails mid-batch loses
// nothing and sends nothing twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { recordEvent, startEventRelay } from '../../lib/events.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform();
});
afterAll(async () => {
  await p?.cleanup();
});

async function until(ok: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Writes `count` events on `subject` (data.i = 0..count-1) in one transaction; returns the i's the bus delivers, as they come. */
async function written(subject: string, count: number): Promise<number[]> {
  const got: number[] = [];
  await p.bus.subscribe({ subjects: [subject] }, (d) => {
    got.push(d.data.i as number);
  });
  await p.db.prisma.$transaction(async (tx) => {
    for (let i = 0; i < count; i++) await recordEvent(tx, { subject, type: 'relaytest', data: { i } });
  });
  return got;
}

describe('event relay', () => {
  it('publishes every row once, in order, over several batches, and leaves the outbox empty', async () => {
    // 450 rows: three batches of at most 200.
    const got = await written('cog.relaytest.a', 450);
    const relay = startEventRelay(p, { pollMs: 50 });
    try {
      await until(() => got.length >= 450);
      await relay.flush();
      expect(got).toEqual(Array.from({ length: 450 }, (_, i) => i));
      expect(await p.db.prisma.eventOutbox.count()).toBe(0);
    } finally {
      await relay.close();
    }
  });

  it('a publish that fails mid-batch: the rows sent are deleted, the rest follow later, none twice', async () => {
    const got = await written('cog.relaytest.b', 300);
    // The bus refuses the 251st publish once (a test double at the bus boundary).
    const publish = p.bus.publish.bind(p.bus);
    let calls = 0;
    p.bus.publish = async (...args: Parameters<typeof publish>) => {
      if (++calls === 251) throw new Error('bus unavailable');
      return publish(...args);
    };
    const relay = startEventRelay(p, { pollMs: 50 });
    try {
      await until(() => got.length >= 300);
      await relay.flush();
      expect(calls).toBeGreaterThan(300); // the failed row was published again
      expect(got).toEqual(Array.from({ length: 300 }, (_, i) => i));
      expect(await p.db.prisma.eventOutbox.count()).toBe(0);
    } finally {
      p.bus.publish = publish;
      await relay.close();
    }
  });
});
