// The event relay (lib/events.ts): outbox rows published in order over several batches (each
// batch deleted by the statement that reads the next), and a publish that fails mid-batch loses
// nothing and sends nothing twice. Rows a statement hands over at commit are published from memory,
// in order, by this process's relay only; held rows whose writer died go once their hold ends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { eventsPart, recordEvent, startEventRelay, type EventRecord } from '../../lib/events.ts';
import { runStatement } from '../../lib/db/statement.ts';
import { sql } from '../../lib/db/index.ts';

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
    // The bus refuses the 251st message once (a test double at the bus boundary). The relay
    // publishes a row's events with publishMany: the double counts each message it is given.
    const publishMany = p.bus.publishMany.bind(p.bus);
    let calls = 0;
    p.bus.publishMany = async (msgs) => {
      const out = [];
      for (const m of msgs) {
        if (++calls === 251) throw new Error('bus unavailable');
        out.push(...(await publishMany([m])));
      }
      return out;
    };
    const relay = startEventRelay(p, { pollMs: 50 });
    try {
      await until(() => got.length >= 300);
      await relay.flush();
      expect(calls).toBeGreaterThan(300); // the failed row was published again
      expect(got).toEqual(Array.from({ length: 300 }, (_, i) => i));
      expect(await p.db.prisma.eventOutbox.count()).toBe(0);
    } finally {
      p.bus.publishMany = publishMany;
      await relay.close();
    }
  });

  const events = (subject: string, from: number, count: number): EventRecord[] =>
    Array.from({ length: count }, (_, k) => ({ subject, type: 'relaytest', data: { i: from + k }, msgId: `${subject}:${from + k}` }));

  it('rows handed over at commit: published in order from memory, never read back, deleted by the next statement, once each with a second relay polling', async () => {
    const got: number[] = [];
    await p.bus.subscribe({ subjects: ['cog.relaytest.c'] }, (d) => {
      got.push(d.data.i as number);
    });
    const published = new Map<string, number>();
    const publishMany = p.bus.publishMany.bind(p.bus);
    p.bus.publishMany = async (msgs) => {
      for (const m of msgs) published.set(m.msgId ?? '', (published.get(m.msgId ?? '') ?? 0) + 1);
      return publishMany(msgs);
    };
    // What the relays read from the table (the handed rows must not be among it), and the deletes they send themselves.
    const readBack: string[] = [];
    let relayDeletes = 0;
    const query = p.db.driver.query.bind(p.db.driver);
    p.db.driver.query = (async (sql: string, params?: unknown[], o?: { prepare?: boolean }) => {
      if (/^\s*(WITH sent AS \()?DELETE FROM "EventOutbox"/.test(sql)) relayDeletes++;
      const rows = await query(sql, params, o);
      if (/FROM "EventOutbox"/.test(sql) && /^\s*(WITH|SELECT)/.test(sql))
        for (const r of rows as Array<{ msgId?: string }>) if (r.msgId) readBack.push(r.msgId);
      return rows;
    }) as typeof p.db.driver.query;
    // This process's relay, left to rely on the writers' statements for its deletes.
    const relay = startEventRelay(p, { pollMs: 20, deleteWaitMs: 60_000 });
    // Another process's relay on the same database: it gets no handoffs, and polls the table.
    const other = startEventRelay({ ...p, db: { ...p.db } } as TestPlatform, { pollMs: 5 });
    try {
      // 20 statements of 10 events each (one outbox row each), each once the one before was published.
      for (let b = 0; b < 20; b++) {
        await runStatement(p.db, [eventsPart(events('cog.relaytest.c', b * 10, 10), { handTo: p.db })!]);
        await until(() => got.length >= (b + 1) * 10);
      }
      await new Promise((r) => setTimeout(r, 100)); // both relays polled meanwhile
      expect(got).toEqual(Array.from({ length: 200 }, (_, i) => i));
      expect([...published.entries()].filter(([id, n]) => id.startsWith('cog.relaytest.c:') && n !== 1)).toEqual([]);
      expect(readBack.filter((id) => id.includes('cog.relaytest.c:'))).toEqual([]);
      // Each statement deleted the row published before it; the last one's row waits for the relay.
      expect(relayDeletes).toBe(0);
      expect(await p.db.prisma.eventOutbox.count()).toBe(1);
      await relay.close(); // deletes what it published
      expect(relayDeletes).toBe(1);
      expect(await p.db.prisma.eventOutbox.count()).toBe(0);
    } finally {
      p.bus.publishMany = publishMany;
      p.db.driver.query = query;
      await other.close();
      await relay.close();
    }
  });

  it('a statement that fails gives its deletes back: the relay deletes those rows itself', async () => {
    const got: number[] = [];
    await p.bus.subscribe({ subjects: ['cog.relaytest.e'] }, (d) => {
      got.push(d.data.i as number);
    });
    const relay = startEventRelay(p, { pollMs: 20, deleteWaitMs: 30 });
    try {
      await runStatement(p.db, [eventsPart(events('cog.relaytest.e', 0, 3), { handTo: p.db })!]);
      await until(() => got.length >= 3);
      // The next statement claims the published row's delete, then fails: nothing of it stays.
      const failing = { checks: [{ holds: sql`false`, fail: () => new Error('refused') }] };
      await expect(runStatement(p.db, [eventsPart(events('cog.relaytest.e', 3, 2), { handTo: p.db })!, failing])).rejects.toThrow('refused');
      await until(async () => (await p.db.prisma.eventOutbox.count()) === 0, 2_000); // well inside the hold
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual([0, 1, 2]);
    } finally {
      await relay.close();
    }
  });

  it("held rows whose writer's relay never took them: no relay publishes them before the hold ends, any relay after", async () => {
    const got: number[] = [];
    await p.bus.subscribe({ subjects: ['cog.relaytest.d'] }, (d) => {
      got.push(d.data.i as number);
    });
    const relay = startEventRelay(p, { pollMs: 20 });
    try {
      // Inside a transaction the statement has not committed when it returns: nothing is handed
      // over (as when the writer's process dies between its commit and the handoff).
      await p.db.prisma.$transaction((tx) => runStatement(tx, [eventsPart(events('cog.relaytest.d', 0, 5), { handTo: p.db })!]));
      await relay.flush();
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual([]);
      expect(await p.db.prisma.eventOutbox.count()).toBe(1); // five events, one row
      // The hold ends: the relay publishes them from the table.
      await p.db.prisma.$executeRaw`UPDATE "EventOutbox" SET "heldUntil" = now() - interval '1 second'`;
      await until(() => got.length >= 5);
      await relay.flush();
      expect(got).toEqual([0, 1, 2, 3, 4]);
      expect(await p.db.prisma.eventOutbox.count()).toBe(0);
    } finally {
      await relay.close();
    }
  });
});
