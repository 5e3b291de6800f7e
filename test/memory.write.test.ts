// The memory write path under concurrency and refusal (flows/memory.ts): group commit of many
// writers on one stack (every CID reachable from the head exactly once, balances exact to the
// milli-unit) and over many stacks (one read and one write statement a batch; a stack another
// writer moved meanwhile planned again alone), on PGlite and on PostgreSQL; and, with the
// Hippocampus over HTTP (distributed mode), a write that calls no Hippocampus at all (its payload
// commits with its index row) and a write refused after its batch was planned that leaves nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestApp, memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { freshDatabase } from './helpers/postgres.ts';
import { httpHippocampus, type HippocampusClient } from '../subgraphs/memory/index.ts';
import { decommissionSleeve } from '../subgraphs/sleeves/index.ts';
import { setEpisodicHead } from '../subgraphs/stacks/index.ts';
import { sealNode } from '../subgraphs/memory/memory.ts';
import { putNode } from '../subgraphs/memory/hippocampus/store.ts';
import { perceive } from '../flows/memory.ts';
import { recall } from '../flows/recall.ts';
import { burn, mint, sleeveAccount } from '../subgraphs/economy/index.ts';
import { startEventRelay } from '../lib/events.ts';

const enc = encodeURIComponent;

async function setup(t: MemoryTestApp, kinds: Array<'A' | 'B'>) {
  const inject = async (method: string, url: string, payload?: unknown) => {
    const res = await t.app.inject({ method: method as never, url, payload: payload as never });
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
  };
  const stack = (await inject('POST', '/v1/stacks', { name: 'group' })).body;
  const sleeves = [];
  for (const k of kinds) {
    sleeves.push(
      k === 'A'
        ? (await inject('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'human' })).body
        : (await inject('POST', `/v1/sleeves/${enc(stack.id)}`, { kind: 'ai' })).body,
    );
  }
  return { inject, stack, sleeves };
}

/** Milli-units a (non-system) account holds, from the Balance rows and from the ledger: both must agree. */
async function held(t: MemoryTestApp, account: string) {
  const rows = await t.p.db.prisma.balance.findMany({ where: { account } });
  const entries = await t.p.db.prisma.ledgerEntry.groupBy({ by: ['token'], where: { account }, _sum: { milli: true } });
  const balance = Object.fromEntries(rows.map((r) => [r.token, r.milli]));
  const ledger = Object.fromEntries(entries.map((e) => [e.token, e._sum.milli ?? 0n]));
  return { balance, ledger };
}

/**
 * Runs `hook` once, right before the next write statement of a memory write batch (after the batch
 * read and planned): what another process does meanwhile. Returns the restore function.
 */
function beforeWriteStatement(t: MemoryTestApp, hook: () => Promise<void>): { restore(): void; ran(): boolean } {
  const driver = t.p.db.driver;
  const query = driver.query;
  let ran = false;
  driver.query = (async (...args: Parameters<typeof query>) => {
    if (!ran && /^WITH stack_lock AS/.test(args[0])) {
      ran = true;
      await hook();
    }
    return query.apply(driver, args);
  }) as typeof query;
  return { restore: () => void (driver.query = query), ran: () => ran };
}

/** The write path's statements through the driver while `fn` runs: the batch reads and the write statements. */
async function statementsOf(t: MemoryTestApp, fn: () => Promise<unknown>): Promise<{ reads: number; writes: number }> {
  const driver = t.p.db.driver;
  const query = driver.query;
  const n = { reads: 0, writes: 0 };
  driver.query = ((...args: Parameters<typeof query>) => {
    if (/^SELECT \(SELECT json_agg/.test(args[0]) && /FROM "Stack" WHERE id = ANY/.test(args[0])) n.reads++;
    if (/^WITH stack_lock AS/.test(args[0])) n.writes++;
    return query.apply(driver, args);
  }) as typeof query;
  try {
    await fn();
  } finally {
    driver.query = query;
  }
  return n;
}

for (const db of ['pglite', 'postgres'] as const) {
  describe(`group commit on ${db}`, () => {
    let t: MemoryTestApp;
    beforeAll(async () => {
      t = await memoryTestAppOn(db);
      t.p.setEpoch(3);
    }, 120_000);
    afterAll(async () => {
      await t?.close();
    });

    it("each write's event is published once, in the order the stack's nodes were written, and the outbox empties (on PostgreSQL handed to the relay, never read back)", async () => {
      const {
        inject,
        stack,
        sleeves: [a, b],
      } = await setup(t, ['B', 'B']);
      const got: string[] = [];
      const sub = await t.p.bus.subscribe({ subjects: [`cog.perceive.${stack.id}`, `cog.memory.remembered.${stack.id}`] }, (d) => {
        got.push(d.data.cid as string);
      });
      // What the relay reads back from the table: on PostgreSQL none of these writes' events.
      const readBack: string[] = [];
      const driver = t.p.db.driver;
      const query = driver.query;
      driver.query = (async (...args: Parameters<typeof query>) => {
        const rows = await query.apply(driver, args);
        if (/FROM "EventOutbox"/.test(args[0]) && /^\s*(WITH|SELECT)/.test(args[0]))
          readBack.push(...(rows as Array<{ data?: unknown }>).map((r) => JSON.stringify(r.data ?? null)));
        return rows;
      }) as typeof query;
      const relay = startEventRelay(t.p, { pollMs: 20 });
      try {
        const results = await Promise.all(
          Array.from({ length: 60 }, (_, i) =>
            i % 3 === 2
              ? inject('POST', `/v1/sleeves/${enc((i % 2 ? a : b).id)}/remember`, { text: `r${i}` })
              : inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: (i % 2 ? a : b).id, text: `p${i}` }),
          ),
        );
        expect(results.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
        const end = Date.now() + 10_000;
        while ((got.length < 60 || (await t.p.db.prisma.eventOutbox.count()) > 0) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
        // Once each, in write order: from the first node to the head.
        const nodes = await t.p.db.prisma.memoryNode.findMany({ where: { stackId: stack.id }, orderBy: { writeSeq: 'asc' } });
        expect(got).toEqual(nodes.map((n) => n.cid));
        expect(new Set(got)).toEqual(new Set(results.map((r) => r.body.cid as string)));
        expect(await t.p.db.prisma.eventOutbox.count()).toBe(0);
        if (db === 'postgres') expect(readBack.filter((d) => got.some((cid) => d.includes(cid)))).toEqual([]);
      } finally {
        driver.query = query;
        await relay.close();
        await sub.close();
      }
    });

    it('200 concurrent writers over two sleeves of one stack: each its own CID, every CID reachable from the head once, balances exact', async () => {
      const {
        inject,
        stack,
        sleeves: [a, b],
      } = await setup(t, ['B', 'B']);
      // Perceives in both forms, remembers with and without a pin, interleaved over the two sleeves.
      const calls = Array.from({ length: 200 }, (_, i) => {
        const s = i % 2 ? a : b;
        switch ((i >> 1) % 4) {
          case 0:
            return inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: `p${i}` });
          case 1:
            return inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: `p${i}` });
          case 2:
            return inject('POST', `/v1/sleeves/${enc(s.id)}/remember`, { text: `r${i}`, pin: true });
          default:
            return inject('POST', `/v1/sleeves/${enc(s.id)}/remember`, { text: `r${i}` });
        }
      });
      const results = await Promise.all(calls);
      expect(results.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
      const cids = results.map((r) => r.body.cid as string);
      expect(new Set(cids).size).toBe(200);

      const nodes = await t.p.db.prisma.memoryNode.findMany({ where: { stackId: stack.id } });
      expect(nodes).toHaveLength(200);
      const byCid = new Map(nodes.map((n) => [n.cid, n]));
      const linkedBy = new Map<string, number>();
      for (const n of nodes) for (const l of n.links) linkedBy.set(l, (linkedBy.get(l) ?? 0) + 1);
      expect([...linkedBy.values()].every((v) => v === 1)).toBe(true);
      // One chain from the head to the first node: every CID exactly once.
      const head = (await t.p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } })).episodicHead;
      const chain: string[] = [];
      for (let cur: string | undefined = head ?? undefined; cur; cur = byCid.get(cur)?.links[0]) chain.push(cur);
      expect(chain).toHaveLength(200);
      expect(new Set(chain)).toEqual(new Set(cids));
      expect(nodes.filter((n) => n.pinned)).toHaveLength(50);
      // Write order is chain order: writeSeq grows from the first node to the head.
      const seqs = chain.map((c) => byCid.get(c)!.writeSeq);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i - 1]! > seqs[i]!).toBe(true);

      // Each sleeve wrote 100 times: 100 x 0.5 compute, 25 pins x 1 memory, drift +100; exact to the milli-unit.
      for (const s of [a, b]) {
        const { balance, ledger } = await held(t, `sleeve:${s.id}`);
        expect(balance.compute).toBe(1_000_000n - 100n * 500n);
        expect(balance.memory).toBe(1_000_000n - 25n * 1000n);
        expect(ledger.compute).toBe(balance.compute);
        expect(ledger.memory).toBe(balance.memory);
        const row = await t.p.db.prisma.sleeve.findUniqueOrThrow({ where: { id: s.id } });
        expect(row.driftMilli).toBe(100_000);
        expect(cids).toContain(row.seenHead);
      }
      // Each write is its own posting: 200 perceive/remember postings, each balanced to zero.
      const postings = await t.p.db.prisma.ledgerEntry.groupBy({
        by: ['txId'],
        where: { reason: { in: ['perceive', 'remember'] }, ref: { in: [a.id, b.id] } },
        _sum: { milli: true },
      });
      expect(postings).toHaveLength(200);
      expect(postings.every((x) => x._sum.milli === 0n)).toBe(true);
      const burned = await t.p.db.prisma.ledgerEntry.aggregate({ where: { account: 'burn', ref: { in: [a.id, b.id] } }, _sum: { milli: true } });
      expect(burned._sum.milli).toBe(2n * (100n * 500n + 25n * 1000n));
    }, 180_000);

    it('a sleeve short of tokens is refused (402) in the middle of a batch; the writes around it commit', async () => {
      const {
        inject,
        stack,
        sleeves: [rich, poor],
      } = await setup(t, ['B', 'A']);
      // The poor sleeve (Shape A, 250 memory) can pin 250 times: the 251st and later are refused.
      await t.p.db.prisma.balance.update({ where: { account_token: { account: `sleeve:${poor.id}`, token: 'memory' } }, data: { milli: 2500n } });
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          i % 2
            ? inject('POST', `/v1/sleeves/${enc(poor.id)}/remember`, { text: `poor ${i}`, pin: true })
            : inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: rich.id, text: `rich ${i}` }),
        ),
      );
      const poorOk = results.filter((r, i) => i % 2 && r.status === 200).length;
      expect(poorOk).toBe(2);
      expect(results.filter((r, i) => i % 2 && r.status === 402)).toHaveLength(4);
      expect(results.filter((_r, i) => !(i % 2)).every((r) => r.status === 200)).toBe(true);
      const { balance } = await held(t, `sleeve:${poor.id}`);
      expect(balance.memory).toBe(500n);
      const nodes = await t.p.db.prisma.memoryNode.count({ where: { stackId: stack.id } });
      expect(nodes).toBe(8);
    });

    it("a stack this process wrote last skips the batch read; what changed meanwhile elsewhere fails the write statement's checks and is read afresh", async () => {
      const write = (m: Awaited<ReturnType<typeof setup>>, s: { id: string }, text: string) =>
        m.inject('POST', '/v1/perceive', { stackId: m.stack.id, sleeveId: s.id, text });
      const ok = async (m: Awaited<ReturnType<typeof setup>>, s: { id: string }, text: string) => expect((await write(m, s, text)).status).toBe(200);
      const compute = async (s: { id: string }) => (await held(t, sleeveAccount(s.id))).balance.compute ?? 0n;
      const elsewhere = (m: Awaited<ReturnType<typeof setup>>, s: { id: string }, f: typeof burn, milli: bigint) =>
        t.p.db.prisma.$transaction((tx) => f(tx, sleeveAccount(s.id), [{ token: 'compute', milli }], { reason: 'test', epoch: 3, stackId: m.stack.id }));

      // Heads and seen heads.
      const one = await setup(t, ['B', 'B']);
      const [a, b] = one.sleeves;
      expect(await statementsOf(t, () => ok(one, a, 'one'))).toEqual({ reads: 1, writes: 1 });
      // Its last commit is what the next batch of the stack plans from: one statement a write.
      expect(await statementsOf(t, () => ok(one, a, 'two'))).toEqual({ reads: 0, writes: 1 });
      // A sleeve the cache has not seen: read.
      expect(await statementsOf(t, () => ok(one, b, 'three'))).toEqual({ reads: 1, writes: 1 });
      // a recalls, so it has seen b's write; the cache still has a on its own last write, and its plan
      // makes a shadow write. The statement finds a on another head, and the write is planned again
      // from a read, on the head a saw: no branch for it (b's first write made the one branch).
      await recall(t.p, { stackId: one.stack.id, sleeveId: a.id, depth: 5 });
      expect(await statementsOf(t, () => ok(one, a, 'four'))).toEqual({ reads: 1, writes: 2 });
      const branches = await t.p.db.prisma.memoryBranch.findMany({ where: { stackId: one.stack.id } });
      expect(branches.map((x) => x.sleeveId)).toEqual([b.id]);

      // The cache says enough, the database does not (spent elsewhere): the cached plan reaches the
      // statement, which refuses the burn; read afresh, the write is refused with the database's figures.
      const two = await setup(t, ['B']);
      const [c] = two.sleeves;
      await ok(two, c, 'one');
      await elsewhere(two, c, burn, (await compute(c)) - 500n);
      expect(await statementsOf(t, () => ok(two, c, 'two'))).toEqual({ reads: 0, writes: 1 });
      expect(await compute(c)).toBe(0n);
      let refused: { status: number; body: { detail?: string } } | undefined;
      expect(await statementsOf(t, async () => void (refused = await write(two, c, 'three')))).toEqual({ reads: 1, writes: 1 });
      expect(refused?.status).toBe(402);

      // The other way: the cache says nothing is left (true when it wrote), then a grant elsewhere.
      // The cached plan would refuse; a refusal is the database's to make, so the write is planned
      // again from a read and goes through.
      const three = await setup(t, ['B']);
      const [d] = three.sleeves;
      await elsewhere(three, d, burn, (await compute(d)) - 500n);
      await ok(three, d, 'one');
      expect(await compute(d)).toBe(0n);
      await elsewhere(three, d, mint, 500n);
      expect(await statementsOf(t, () => ok(three, d, 'two'))).toEqual({ reads: 1, writes: 1 });
      expect(await compute(d)).toBe(0n);

      // A sleeve decommissioned elsewhere after the cache saw it alive: 409, nothing written.
      const four = await setup(t, ['B']);
      const [e] = four.sleeves;
      await ok(four, e, 'one');
      await ok(four, e, 'two');
      await decommissionSleeve(t.p, e.id, 'test');
      expect((await write(four, e, 'three')).status).toBe(409);
      for (const [m, n] of [
        [one, 4],
        [two, 2],
        [three, 2],
        [four, 2],
      ] as const)
        expect(await t.p.db.prisma.memoryNode.count({ where: { stackId: m.stack.id } })).toBe(n);
    });

    it('writes over many stacks commit as one batch (one read and one write statement); a stack another writer moved meanwhile is planned again alone', async () => {
      const made: Array<Awaited<ReturnType<typeof setup>>> = [];
      for (let i = 0; i < 12; i++) made.push(await setup(t, ['B']));
      for (const m of made)
        expect((await m.inject('POST', '/v1/perceive', { stackId: m.stack.id, sleeveId: m.sleeves[0].id, text: 'first' })).status).toBe(200);
      const writeAll = (round: string) =>
        Promise.all(
          made.flatMap((m) =>
            [0, 1, 2].map((j) => m.inject('POST', '/v1/perceive', { stackId: m.stack.id, sleeveId: m.sleeves[0].id, text: `${round} ${j}` })),
          ),
        );
      /** The stack's chain from its head: every node linked once, oldest last. */
      const chainOf = async (stackId: string) => {
        const nodes = await t.p.db.prisma.memoryNode.findMany({ where: { stackId } });
        const byCid = new Map(nodes.map((n) => [n.cid, n]));
        const head = (await t.p.db.prisma.stack.findUniqueOrThrow({ where: { id: stackId } })).episodicHead;
        const chain: string[] = [];
        for (let cur: string | undefined = head ?? undefined; cur; cur = byCid.get(cur)?.links[0]) chain.push(cur);
        return { chain, nodes: nodes.length };
      };
      // The driver's statements, counted (the write path's two a batch go through it).
      const driver = t.p.db.driver;
      const query = driver.query;
      let statements = 0;
      driver.query = ((...args: Parameters<typeof query>) => {
        statements++;
        return query.apply(driver, args);
      }) as typeof query;
      try {
        const first = await writeAll('round 1');
        expect(first.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
        // 36 writes over 12 stacks: one stack a write each would be 72 statements.
        expect(statements).toBeLessThanOrEqual(12);
      } finally {
        driver.query = query;
      }
      for (const m of made) expect(await chainOf(m.stack.id)).toEqual({ chain: expect.any(Array), nodes: 4 });
      for (const m of made) expect((await chainOf(m.stack.id)).chain).toHaveLength(4);

      // Another process writes to one stack after the batch read it: its head move fails the
      // batch's check, the batch is undone and committed stack by stack.
      const victim = made[5]!.stack.id;
      const meanwhile = beforeWriteStatement(t, () =>
        t.p.db.prisma.$transaction(async (tx) => {
          const st = await tx.stack.findUniqueOrThrow({ where: { id: victim } });
          const foreign = sealNode(t.p, st, 3, 'from another process', st.episodicHead);
          await putNode(tx, t.p.objects, { ...foreign, epoch: 3, stackId: victim, kind: 'perceive' }, 3);
          await setEpisodicHead(tx, victim, foreign.cid, { epoch: 3 });
        }),
      );
      try {
        const second = await writeAll('round 2');
        expect(second.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
      } finally {
        meanwhile.restore();
      }
      expect(meanwhile.ran()).toBe(true);
      // Every stack: its 7 nodes in one chain from the head (the victim's 8, the foreign one among them).
      for (const m of made) {
        const { chain, nodes } = await chainOf(m.stack.id);
        const want = m.stack.id === victim ? 8 : 7;
        expect([chain.length, nodes, new Set(chain).size]).toEqual([want, want, want]);
      }
      // Each sleeve paid for its own 7 writes, exactly.
      for (const m of made) expect((await held(t, `sleeve:${m.sleeves[0].id}`)).balance.compute).toBe(1_000_000n - 7n * 500n);
      // The Cortex mirror's rows carry the same burns: a row a batch (its stacks' burns summed, a
      // `burns` row when it spans several stacks), not a row a write.
      type Burned = { stackId: string; amounts: Array<{ token: string; milli: string }> };
      const ids = new Set(made.map((m) => m.stack.id));
      const mirrored = new Map<string, bigint>();
      let rows = 0;
      for (const r of await t.p.db.prisma.chainLedgerIntent.findMany({ where: { kind: { in: ['burn', 'burns'] } } })) {
        const parts = r.kind === 'burns' ? (r.payload as { stacks: Burned[] }).stacks : [r.payload as Burned];
        if (!parts.some((x) => ids.has(x.stackId))) continue;
        rows++;
        for (const x of parts) for (const a of x.amounts) if (a.token === 'compute') mirrored.set(x.stackId, (mirrored.get(x.stackId) ?? 0n) + BigInt(a.milli));
      }
      for (const m of made) expect(mirrored.get(m.stack.id)).toBe(7n * 500n);
      // 84 writes: the 12 first ones alone, the victim's round stack by stack, round 1 batched.
      expect(rows).toBeLessThan(12 + 12 + 12);
    }, 180_000);
  });
}

describe('distributed mode: the Hippocampus over HTTP (PostgreSQL)', () => {
  let t: MemoryTestApp;
  let drop: () => Promise<void>;
  let http: HippocampusClient;
  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    t = await memoryTestApp({ DATABASE_URL: fresh.url });
    http = httpHippocampus(t.hippocampus.url!);
    t.p.ports.hippocampus = http; // as a gateway without a Hippocampus in its process is wired
    t.p.setEpoch(7);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await drop?.();
  });

  it('a write makes no call to the Hippocampus: its payload commits with its index row; the Hippocampus serves it', async () => {
    const {
      stack,
      sleeves: [s],
    } = await setup(t, ['A']);
    const calls: string[] = [];
    const refuse = (name: string) => async () => {
      calls.push(name);
      throw new Error(`the write called the Hippocampus (${name})`);
    };
    t.p.ports.hippocampus = { ...http, put: refuse('put'), pin: refuse('pin'), meta: refuse('meta') };
    let cids: string[];
    try {
      const first = await perceive(t.p, { sleeveId: s.id, text: 'first' });
      const then = await Promise.all([1, 2, 3].map((i) => perceive(t.p, { sleeveId: s.id, text: `then ${i}` })));
      cids = [first, ...then].map((r) => r.cid);
    } finally {
      t.p.ports.hippocampus = http;
    }
    expect(calls).toEqual([]);
    // The epoch's writes as the Thalamus folds them (GET /epochs/:epoch/writes), in write order.
    expect((await http.epochWrites(7)).filter((c) => cids.includes(c))).toEqual(cids);
    expect(await t.p.db.prisma.memoryNode.count({ where: { stackId: stack.id, payload: { not: null } } })).toBe(4);
    // Read back through the Hippocampus service: its walk and its GET take the payload from the row.
    const walk = await http.walk(cids.at(-1)!, 10, 7);
    expect(walk.missing).toEqual([]);
    expect(walk.nodes.map((n) => n.cid).sort()).toEqual([...cids].sort());
    const res = await fetch(`${t.hippocampus.url}/dag/${encodeURIComponent(cids[0]!)}?epoch=7`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { ciphertext: { v: number } }).ciphertext.v).toBe(1);
  });

  it('a perceive refused after its batch was planned (sleeve decommissioned meanwhile: 409) leaves no node, counts in no epoch', async () => {
    const {
      stack,
      sleeves: [s],
    } = await setup(t, ['A']);
    const before = await t.p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } });
    const writesBefore = await http.epochWrites(7);
    const meanwhile = beforeWriteStatement(t, () => decommissionSleeve(t.p, s.id, 'decommissioned while its write was in flight').then(() => {}));
    try {
      await expect(perceive(t.p, { sleeveId: s.id, text: 'too late' })).rejects.toMatchObject({ status: 409 });
    } finally {
      meanwhile.restore();
    }
    expect(meanwhile.ran()).toBe(true);
    expect(await t.p.db.prisma.memoryNode.count({ where: { stackId: stack.id } })).toBe(0);
    expect(await http.epochWrites(7)).toEqual(writesBefore);
    const after = await t.p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } });
    expect(after.episodicHead).toBe(before.episodicHead);
    // Nothing was burned for it: the decommission swept the sleeve's whole 250 compute to the pool.
    const pool = await t.p.db.prisma.balance.findUnique({ where: { account_token: { account: `pool:${stack.id}`, token: 'compute' } } });
    expect(pool?.milli).toBe(250_000n);
    expect(await t.p.db.prisma.ledgerEntry.count({ where: { reason: 'perceive', ref: s.id } })).toBe(0);
  });
});
