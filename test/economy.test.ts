// Treasury: emission with CPV and EBC decay, issuance, claims, Shape B balances, slashing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { generateIdentity } from '../lib/crypto.ts';
import { createStack, HeadMoved, headMovePart, lastActiveEpochsOf, markStackActive } from '../subgraphs/stacks/stacks.ts';
import { composeStatement, runStatement } from '../lib/db/statement.ts';
import { markActive } from '../subgraphs/economy/accrual.ts';
import type { Tx } from '../lib/db/index.ts';
import { decommissionSleeve, spawnSleeve, spendFromSleeve, syncSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { claim, ebcFactor, emitEpoch, issuance, stackBalancesB } from '../subgraphs/economy/treasury.ts';
import { balanceOf, claimableAccount, poolAccount, systemBalance, SYSTEM, toMilli, transfer } from '../subgraphs/economy/ledger.ts';
import { slashOperator, OPERATOR_BOND, SLASH_AMOUNT, startSlashConsumer } from '../subgraphs/economy/slash.ts';
import { startTreasury } from '../subgraphs/economy/treasury/service.ts';
import { perEpochEmission } from './helpers/emission-oracle.ts';
import { watchEmissions } from '../subgraphs/economy/watch.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform({ TREASURY_PORT: '0' });
});
afterAll(async () => p.cleanup());

const cpv = { computeCoeff: 2, memoryCoeff: 0.5, syncCoeff: 1, routingCoeff: 1.5, residueCoeff: 0.8 };

/**
 * The ledger invariant: every posting sums to zero per token; every Balance row is the sum of its
 * account's entries; system accounts keep no row, and their ledger-derived balances close the books.
 */
async function ledgerBalanced() {
  const db = p.db.prisma;
  const sums = await db.$queryRaw<{ token: string; s: bigint }[]>`SELECT token, SUM(milli)::bigint AS s FROM "LedgerEntry" GROUP BY token`;
  for (const r of sums) expect(r.s, r.token).toBe(0n);
  const drifted = await db.$queryRaw<{ account: string; token: string }[]>`
    SELECT b.account, b.token FROM "Balance" b
    LEFT JOIN (SELECT account, token, SUM(milli)::bigint AS m FROM "LedgerEntry" GROUP BY account, token) e USING (account, token)
    WHERE b.milli <> COALESCE(e.m, 0)`;
  expect(drifted).toEqual([]);
  expect(await db.balance.count({ where: { account: { in: Object.values(SYSTEM) } } })).toBe(0);
  const held = await db.$queryRaw<{ token: string; b: bigint }[]>`SELECT token, SUM(milli)::bigint AS b FROM "Balance" GROUP BY token`;
  const system = await Promise.all(Object.values(SYSTEM).map((a) => systemBalance(db, a)));
  for (const { token, b } of held) {
    const outside = system.reduce((acc, x) => acc + Math.round(x[token as keyof typeof x] * 1000), 0);
    expect(Number(b) + outside, token).toBe(0);
  }
  expect(sums.length).toBeGreaterThan(0);
}

describe('treasury emission', () => {
  it('scales by CPV and decays by EBC over 30 quiet epochs, reaching the floor; an active stack is not decayed', async () => {
    p.setEpoch(0);
    const stack = await createStack(p, { pubkey: generateIdentity().pubKey, cpv });
    for (let e = 1; e <= 30; e++) {
      p.setEpoch(e);
      const r = await emitEpoch(p, e);
      expect(r.stacks).toBeGreaterThanOrEqual(1);
    }
    const events = await issuance(p, stack.id);
    expect(events).toHaveLength(30);
    expect(events[0]!.epoch).toBe(30); // newest first
    const byEpoch = new Map(events.map((ev) => [ev.epoch, ev]));
    for (let e = 1; e <= 30; e++) {
      const ev = byEpoch.get(e)!;
      // Emitted as epoch e begins: the quiet epochs since the stack was last active (epoch 0) are e - 1.
      const f = Math.max(0.25, Math.exp(-0.05 * (e - 1)));
      expect(ev.ebcFactor).toBeCloseTo(f, 9);
      expect(ev.amounts.compute).toBeCloseTo(Math.round(100 * 2 * f * 1000) / 1000, 6);
      expect(ev.amounts.memory).toBeCloseTo(Math.round(100 * 0.5 * f * 1000) / 1000, 6);
      expect(ev.amounts.routing).toBeCloseTo(Math.round(100 * 1.5 * f * 1000) / 1000, 6);
      expect(ev.cpv).toEqual(cpv);
    }
    expect(byEpoch.get(1)!.ebcFactor).toBe(1); // active in epoch 0, the epoch that just ended
    // About 28 quiet epochs reach the floor (e^-1.4 < 0.25 < e^-1.35).
    expect(byEpoch.get(28)!.ebcFactor).toBeGreaterThan(0.25);
    expect(byEpoch.get(29)!.ebcFactor).toBe(0.25);
    expect(byEpoch.get(30)!.amounts).toEqual({ compute: 50, memory: 12.5, sync: 25, routing: 37.5 });
    // Idle for 30 epochs: not one row was written for the stack (emission is computed when asked).
    expect(await p.db.prisma.ledgerEntry.count()).toBe(0);
    expect(await p.db.prisma.emissionRun.count()).toBe(0);
    expect(await p.db.prisma.emission.count()).toBe(0);
    expect(await p.db.prisma.emissionAccrual.findUnique({ where: { stackId: stack.id } })).toMatchObject({ sinceEpoch: 1, settledEpoch: 0, computeMilli: 0n });
  });

  it('records each epoch once, also for concurrent emitters, with the totals of every stack', async () => {
    const stack = await createStack(p, { name: 'idem' }); // at epoch 30, active in it
    p.setEpoch(31);
    const [a, b] = await Promise.all([emitEpoch(p, 31), emitEpoch(p, 31)]);
    expect([a.stacks, b.stacks].filter((n) => n > 0)).toHaveLength(1);
    expect((await emitEpoch(p, 31)).stacks).toBe(0);
    expect((await emitEpoch(p, 30)).stacks).toBe(0); // older than one recorded
    expect(await p.db.prisma.emissionEpoch.count({ where: { epoch: 31 } })).toBe(1);
    const intents = await p.db.prisma.chainOutbox.findMany({ where: { kind: 'emission', ref: 'emission:31' } });
    expect(intents).toHaveLength(1);
    // The totals are what the per-epoch emitter summed over every stack.
    const ids = (await p.db.prisma.stack.findMany({ select: { id: true } })).map((r) => r.id);
    const oracle = [...(await perEpochEmission(p.db.prisma, 31, ids)).values()];
    const payload = intents[0]!.payload as { stacks: number; totalsMilli: Record<string, string> };
    expect(payload.stacks).toBe(ids.length);
    for (const t of ['compute', 'memory', 'sync', 'routing'] as const) expect(BigInt(payload.totalsMilli[t]!), t).toBe(oracle.reduce((x, o) => x + o[t], 0n));
    // Active in epoch 30, the epoch before: undecayed, and nothing was written for the stack.
    expect((await issuance(p, stack.id))[0]).toMatchObject({ epoch: 31, ebcFactor: 1, amounts: { compute: 100, memory: 100, sync: 100, routing: 100 } });
    expect(await p.db.prisma.emissionRun.count({ where: { stackId: stack.id } })).toBe(0);
  });

  it('claim moves claimable into the pool; a second claim gets zeros; unknown stack 404', async () => {
    const stack = await createStack(p, { name: 'claimer' }); // at epoch 31
    p.setEpoch(72); // 41 epochs accrued, the last 13 at the floor
    const listed = (await issuance(p, stack.id)).reduce((x, e) => x + Math.round(e.amounts.compute * 1000), 0);
    expect(listed).toBe(Array.from({ length: 41 }, (_, i) => Math.round(100_000 * Math.max(0.25, Math.exp(-0.05 * i)))).reduce((x, y) => x + y, 0));
    const [c1, c2] = await Promise.all([claim(p, stack.id), claim(p, stack.id)]);
    expect(Math.round((c1.claimable.compute + c2.claimable.compute) * 1000)).toBe(listed);
    expect([c1.claimable.compute, c2.claimable.compute]).toContain(0);
    const pool = await balanceOf(p.db.prisma, poolAccount(stack.id));
    expect(pool).toMatchObject({ compute: listed / 1000, memory: listed / 1000, sync: listed / 1000, routing: listed / 1000, residue: 0 });
    expect((await balanceOf(p.db.prisma, claimableAccount(stack.id))).compute).toBe(0);
    expect(await claim(p, stack.id)).toEqual({ stackId: stack.id, claimable: { compute: 0, memory: 0, sync: 0, routing: 0 } });
    p.setEpoch(73); // one more epoch at the floor
    expect(await claim(p, stack.id)).toEqual({ stackId: stack.id, claimable: { compute: 25, memory: 25, sync: 25, routing: 25 } });
    await expect(claim(p, 'stack:nope')).rejects.toMatchObject({ status: 404 });
    await ledgerBalanced();
  });

  it('publishes emission events for watched stacks only, while they are watched', async () => {
    const watched = await createStack(p, { name: 'watched' });
    const idle = await createStack(p, { name: 'unwatched' });
    const w = await watchEmissions(p, watched.id);
    const e = p.epochs.current() + 1;
    p.setEpoch(e);
    await emitEpoch(p, e);
    const events = await p.db.prisma.eventOutbox.findMany({ where: { subject: { startsWith: 'cog.treasury.emitted.' }, msgId: { endsWith: `:${e}` } } });
    expect(events.map((x) => x.subject)).toEqual([`cog.treasury.emitted.${watched.id}`]);
    const [listed] = await issuance(p, watched.id, 1);
    expect(events[0]!.data).toMatchObject({ type: 'treasury.emitted', stackId: watched.id, epoch: e, amounts: listed!.amounts, ebcFactor: listed!.ebcFactor });
    await w.close();
    p.setEpoch(e + 1);
    await emitEpoch(p, e + 1);
    expect(await p.db.prisma.eventOutbox.count({ where: { subject: { startsWith: 'cog.treasury.emitted.' }, msgId: { endsWith: `:${e + 1}` } } })).toBe(0);
    expect((await issuance(p, idle.id, 2)).map((x) => x.epoch)).toEqual([e + 1, e]);
  });

  it('Shape B balances: raw = alive sleeves + pool, effective = raw x coeff x EBC, residue undecayed', async () => {
    p.setEpoch(80);
    const stack = await createStack(p, { pubkey: generateIdentity().pubKey, cpv });
    p.setEpoch(90); // 10 quiet epochs since creation
    await spawnSleeve(p, { stackId: stack.id, kind: 'ai', shape: 'B' });
    await claim(p, stack.id);
    const b = await stackBalancesB(p, stack.id);
    expect(b.currentEpoch).toBe(90);
    const f = ebcFactor({ floor: 0.25, decayRate: 0.05 }, 90 - b.lastActiveEpoch);
    expect(b.ebcFactor).toBe(f);
    // The emission of epoch 90 counts the quiet epochs before it (81..89).
    const events = await issuance(p, stack.id);
    expect(events.map((e) => e.epoch)).toEqual([90, 89, 88, 87, 86, 85, 84, 83, 82, 81]);
    expect(events[0]!.amounts.compute).toBeCloseTo(100 * 2 * ebcFactor({ floor: 0.25, decayRate: 0.05 }, 89 - b.lastActiveEpoch), 3);
    const emitted = events.reduce((x, e) => x + Math.round(e.amounts.compute * 1000), 0) / 1000;
    expect(b.raw.compute).toBe(1000 + emitted); // spawn grant + claimed emission
    expect(b.effective.compute).toBeCloseTo(b.raw.compute * 2 * f, 3);
    expect(b.effective.residue).toBe(0);
    expect(b.cpv).toEqual(cpv);
    await expect(stackBalancesB(p, 'stack:none')).rejects.toMatchObject({ status: 404 });
  });

  it('a spend from a sleeve decommissioned meanwhile is a 409, not "not enough tokens"', async () => {
    const stack = await createStack(p, { name: 'raced' });
    const s = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
    await decommissionSleeve(p, s.id, 'test');
    // Sleeves spend through spendFromSleeve (the ledger knows accounts, not sleeves).
    await expect(
      p.db.prisma.$transaction((tx) =>
        spendFromSleeve(tx, { id: s.id, stackId: stack.id }, [{ token: 'compute', milli: 500n }], { reason: 'perceive', epoch: 0 }),
      ),
    ).rejects.toMatchObject({ status: 409, code: 'SLEEVE_DECOMMISSIONED' });
  });

  it('spending marks a stack active (lastActiveEpoch), a refused spend does not', async () => {
    p.setEpoch(60);
    const stack = await createStack(p, { pubkey: generateIdentity().pubKey, cpv });
    const s = await spawnSleeve(p, { stackId: stack.id, kind: 'ai', shape: 'B' });
    p.setEpoch(70);
    expect((await stackBalancesB(p, stack.id)).lastActiveEpoch).toBe(60);
    await syncSleeve(p, s.id); // 1 sync token
    const b = await stackBalancesB(p, stack.id);
    expect(b.lastActiveEpoch).toBe(70);
    expect(b.ebcFactor).toBe(1);
    // Drain the sync tokens; the refused sync at a later epoch changes nothing.
    const left = (await balanceOf(p.db.prisma, `sleeve:${s.id}`)).sync;
    await p.db.prisma.$transaction((tx) =>
      transfer(tx, `sleeve:${s.id}`, poolAccount(stack.id), [{ token: 'sync', milli: toMilli(left) }], { reason: 'test-drain', epoch: 70 }),
    );
    p.setEpoch(75);
    await expect(syncSleeve(p, s.id)).rejects.toMatchObject({ status: 402 });
    expect((await stackBalancesB(p, stack.id)).lastActiveEpoch).toBe(70);
  });

  it('marking a stack active is one statement of the economy; a head move already in the epoch asks none', async () => {
    p.setEpoch(80);
    const stack = await createStack(p, { pubkey: generateIdentity().pubKey, cpv });
    const statements = async (f: (tx: Tx) => Promise<unknown>) =>
      p.db.prisma.$transaction(async (tx) => {
        const before = p.db.queryCount();
        const r = await f(tx);
        return { n: p.db.queryCount() - before, r };
      });
    // Settles epochs 81..85, records the run, moves lastActiveEpoch: one statement; then a no-op one.
    expect(await statements((tx) => markActive(tx, stack.id, 85))).toEqual({ n: 1, r: true });
    expect(await statements((tx) => markActive(tx, stack.id, 85))).toEqual({ n: 1, r: false });
    expect(await statements((tx) => markActive(tx, stack.id, 84))).toEqual({ n: 1, r: false });
    expect(await p.db.prisma.emissionRun.findMany({ where: { stackId: stack.id } })).toEqual([
      { stackId: stack.id, fromEpoch: 81, toEpoch: 85, lastActiveEpoch: 80, counted: false },
    ]);
    expect((await p.db.prisma.emissionAccrual.findUniqueOrThrow({ where: { stackId: stack.id } })).lastActiveEpoch).toBe(85);
    // A spend: the stack row lock (the stacks context's) and the mark.
    expect((await statements((tx) => markStackActive(tx, stack.id, 86))).n).toBe(2);
    // A head move is one statement with its activity mark and its NFT mirror, the epoch's first or not.
    const cid = (n: number) => `cog://${String(n).repeat(64)}@${n < 3 ? 87 : 88}`;
    const row = await p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } });
    const move = (from: number | null, to: number, epoch: number) =>
      statements((tx) => runStatement(tx, [headMovePart([{ stack: row, from: from === null ? null : cid(from), to: cid(to), sleeveId: 'sleeve:x' }], epoch)]));
    expect((await move(null, 1, 87)).n).toBe(1);
    expect((await move(1, 3, 88)).n).toBe(1);
    expect((await lastActiveEpochsOf(p.db.prisma, [stack.id])).get(stack.id)).toBe(88);
    expect((await move(3, 4, 88)).n).toBe(1);
    // A head read as already moved in the epoch leaves the activity mark out of the statement.
    const marks = (headEpoch: number | null) =>
      composeStatement([headMovePart([{ stack: { ...row, headEpoch }, from: cid(4), to: cid(5), sleeveId: 'sleeve:x' }], 88)]).sql.text.includes('acc_mark');
    expect([marks(87), marks(88)]).toEqual([true, false]);
    // No outbox row for the NFT's head: the heads mirror sends the moved heads once an epoch.
    expect(await p.db.prisma.chainOutbox.count({ where: { ref: stack.id, kind: { not: 'mintIdentity' } } })).toBe(0);
    // A move from a head that is no longer the head is refused whole: no head change.
    await expect(move(3, 5, 89)).rejects.toBeInstanceOf(HeadMoved);
    expect((await p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } })).episodicHead).toBe(cid(4));
    expect((await lastActiveEpochsOf(p.db.prisma, [stack.id])).get(stack.id)).toBe(88);
    expect((await statements((tx) => markStackActive(tx, stack.id, 88))).n).toBe(1); // the lock only: the head moved in 88
    expect(Object.fromEntries(await lastActiveEpochsOf(p.db.prisma, [stack.id, 'stack:none']))).toEqual({ [stack.id]: 88, 'stack:none': 0 });
    expect((await stackBalancesB(p, stack.id)).lastActiveEpoch).toBe(88);
  });
});

describe('treasury service', () => {
  it('serves issuance and claim with problem+json errors', async () => {
    const svc = await startTreasury(p);
    try {
      const stack = await createStack(p, { name: 'http' });
      // Quiet for 60 epochs since creation: the EBC factor is at its floor.
      const epoch = p.epochs.current() + 60;
      p.setEpoch(epoch);
      const iss = await fetch(`${svc.url}/v1/treasury/issuance/${encodeURIComponent(stack.id)}`);
      expect(iss.status).toBe(200);
      const list = (await iss.json()) as Array<Record<string, unknown>>;
      expect(list[0]).toMatchObject({ stackId: stack.id, epoch, ebcFactor: 0.25, amounts: { compute: 25, memory: 25, sync: 25, routing: 25 } });
      expect(typeof list[0]!.createdAt).toBe('string');
      const c = await fetch(`${svc.url}/v1/treasury/claim`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ stackId: stack.id }),
      });
      const sum = list.reduce((x, e) => x + Math.round((e.amounts as { compute: number }).compute * 1000), 0) / 1000;
      expect(await c.json()).toEqual({ stackId: stack.id, claimable: { compute: sum, memory: sum, sync: sum, routing: sum } });
      const bad = await fetch(`${svc.url}/v1/treasury/claim`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ stackId: 5 }),
      });
      expect(bad.status).toBe(400);
      expect(bad.headers.get('content-type')).toMatch(/problem\+json/);
      const missing = await fetch(`${svc.url}/v1/treasury/claim`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ stackId: 'stack:x' }),
      });
      expect(missing.status).toBe(404);
      const nf = await fetch(`${svc.url}/v1/treasury/issuance/stack:none`);
      expect(nf.status).toBe(404);
    } finally {
      await svc.close();
    }
  });
});

describe('slashing', () => {
  it('bonds an operator on first sight and slashes once per epoch, also from the bus', async () => {
    const operator = generateIdentity().pubKey;
    const first = await slashOperator(p, { operator, epoch: 7 });
    expect(first).toMatchObject({ slashed: SLASH_AMOUNT, remaining: OPERATOR_BOND - SLASH_AMOUNT, duplicate: false });
    const again = await slashOperator(p, { operator, epoch: 7 });
    expect(again).toMatchObject({ slashed: 0, duplicate: true, remaining: OPERATOR_BOND - SLASH_AMOUNT });
    const sub = await startSlashConsumer(p);
    try {
      await p.bus.publish('cog.treasury.slash', { operator, epoch: 8 });
      await p.bus.publish('cog.treasury.slash', { operator, epoch: 8 });
      await p.bus.publish('cog.treasury.slash', { operator: 'not hex', epoch: 9 });
      await expect.poll(async () => (await balanceOf(p.db.prisma, `operator:${operator}`)).routing, { timeout: 5000 }).toBe(OPERATOR_BOND - 2 * SLASH_AMOUNT);
    } finally {
      await sub.close();
    }
    await ledgerBalanced();
  });
});
