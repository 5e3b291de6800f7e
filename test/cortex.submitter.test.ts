// The Cortex outbox submitter end to end against a real anvil (1 s blocks): intents become
// transactions, many per block; a crash mid-outbox loses nothing and sends nothing twice; a dropped
// transaction is re-sent; reconcile reports drift; Thalamus reads the epoch's hashes in nonce order.
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../lib/log.ts';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { startTestChain, type TestChain } from './helpers/test-chain.ts';
import { startSubmitter, outboxStatus, type Submitter } from '../subgraphs/chains/cortex/submitter.ts';
import { reconcileChain, cortexTxSource, driftChecker } from '../subgraphs/chains/cortex/reconcile.ts';
import { enqueueChainTx, type ChainTxKind } from '../subgraphs/chains/outbox.ts';
import { recordKey } from '../subgraphs/chains/cortex/calls.ts';
import { sha256, toHex, fromHex, utf8 } from '../lib/crypto.ts';

let chain: TestChain;
let c: TestChain; // a fresh suite per test on the shared node
let p: TestPlatform;
const running: Submitter[] = [];
beforeAll(async () => {
  [chain, p] = await Promise.all([startTestChain({ blockTime: 1 }), testPlatform()]);
});
afterAll(async () => {
  await chain?.close();
  await p?.cleanup();
});
beforeEach(async () => {
  c = await chain.freshSuite();
});
afterEach(async () => {
  for (const s of running.splice(0)) await s.close();
  // One database for the file (PGlite start-up is the slow part): each test starts empty.
  await p.db.prisma.chainOutbox.deleteMany();
  await p.db.prisma.chainLedgerIntent.deleteMany();
  await p.db.prisma.stack.deleteMany();
  await p.db.prisma.sleeve.deleteMany();
  await p.db.prisma.epochAnchor.deleteMany();
});

const CPV = { syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1.5, residueCoeff: 0.5, routingCoeff: 2 };
const enqueue = (kind: ChainTxKind, ref: string, payload: Record<string, unknown>, epoch?: number) =>
  p.db.prisma.$transaction((tx) => enqueueChainTx(tx, { kind, ref, payload, epoch }));
const start = (opts: Parameters<typeof startSubmitter>[3] = {}) => {
  const s = startSubmitter(p.db, c, p.log, { pollMs: 50, droppedAfterMs: 400, ...opts });
  running.push(s);
  return s;
};
const stackId = (t: number) => `stack:human:${t}:${t.toString(16).padStart(12, '0')}`;
async function insertStack(t: number) {
  await p.db.prisma.stack.create({
    data: {
      id: stackId(t),
      tokenId: t,
      name: `s${t}`,
      kind: 'human',
      shape: 'A',
      pubKey: t.toString(16).padStart(64, '0'),
      syncCoeff: 1,
      memoryCoeff: 1,
      computeCoeff: 1.5,
      residueCoeff: 0.5,
      routingCoeff: 2,
      masterSecret: 'sealed',
    },
  });
}
const hex32 = (s: string) => toHex(sha256(s));
const fold = (evm: string, ipfs: string, sl: string) =>
  toHex(sha256(new Uint8Array([...utf8('cog-coh-v1'), ...fromHex(evm), ...new Uint8Array(32), ...fromHex(ipfs), ...fromHex(sl)])));

describe('cortex submitter', () => {
  it('drives every intent kind onto Cortex, many per block, and writes the chain side back', async () => {
    const t = 100;
    await insertStack(t);
    await p.db.prisma.sleeve.create({ data: { id: 'sleeve:ai:1:0000aaaa', stackId: stackId(t), embodimentType: 'ai', shape: 'A', tickRate: 2000 } });
    await enqueue('mintIdentity', stackId(t), { stackId: stackId(t), tokenId: t, owner: null, cpv: CPV }, 1);
    await enqueue(
      'mint',
      'ledger:1',
      {
        stackId: stackId(t),
        amounts: [
          { token: 'compute', milli: '1000000' },
          { token: 'memory', milli: '250000' },
        ],
      },
      1,
    );
    await enqueue('spawnSleeve', 'sleeve:ai:1:0000aaaa', { sleeveId: 'sleeve:ai:1:0000aaaa', stackId: stackId(t), kind: 'ai' }, 1);
    await enqueue('burn', 'ledger:2', { stackId: stackId(t), amounts: [{ token: 'compute', milli: '500' }] }, 1);
    await enqueue('updateStack', stackId(t), { stackId: stackId(t), tokenId: t, epoch: 2, episodicHead: 'cog://' + 'cd'.repeat(32) + '@2' }, 2);
    await enqueue('openResidue', 'residue:shard-loss:01', { residueId: 'residue:shard-loss:01', kind: 'shard-loss', bountyMilli: 15000 }, 2);
    await enqueue('claimResidue', 'residue:shard-loss:01', { residueId: 'residue:shard-loss:01', claimant: stackId(t), bountyMilli: 15000 }, 2);
    await enqueue(
      'route',
      'needle:aa',
      { sagaId: 'needle:aa', stackId: stackId(t), from: 'sleeve:ai:1:0000aaaa', to: 'sleeve:human:2:0000bbbb', shards: ['cog://a@1', 'cog://b@1'] },
      2,
    );
    await enqueue('emission', 'emission:1', { stackId: stackId(t), epoch: 2, amounts: { compute: 150, memory: 100, sync: 100, routing: 200 } }, 2);
    await enqueue(
      'emission',
      'emission:2',
      { epoch: 2, stacks: 1, totalsMilli: { compute: '150000', memory: '100000', sync: '100000', routing: '200000' } },
      2,
    );
    await enqueue(
      'route',
      'needle:bb',
      { sagaId: 'needle:bb', stackId: stackId(t), from: 'sleeve:ai:1:0000aaaa', to: 'memory', shards: [], routeHash: hex32('r'), status: 'routed' },
      2,
    );
    await enqueue('route', 'needle:bb:abort', { sagaId: 'needle:bb', status: 'compensated', routeHash: hex32('r') }, 2);
    const [evm, ipfs, sl] = [hex32('e'), hex32('i'), hex32('s')];
    await p.db.prisma.epochAnchor
      .create({ data: { epoch: 2, crossRoot: fold(evm, ipfs, sl), evmRoot: evm, ipfsRoot: ipfs, sleevesRoot: sl, btcRoot: '0'.repeat(64), gaps: [] } })
      .catch(() => undefined);
    await enqueue('anchor', 'anchor:2', { epoch: 2, crossRoot: fold(evm, ipfs, sl), evmRoot: evm, ipfsRoot: ipfs, sleevesRoot: sl }, 2);
    await enqueue('decommissionSleeve', 'sleeve:ai:1:0000aaaa', { sleeveId: 'sleeve:ai:1:0000aaaa' }, 3);

    expect((await p.db.prisma.stack.findUnique({ where: { id: stackId(t) } }))!.chainStatus).toBe('pending');
    const s = start();
    await s.idle(20_000);
    const rows = await p.db.prisma.chainOutbox.findMany({ orderBy: { id: 'asc' } });
    expect(rows.map((r) => [r.kind, r.status, r.lastError])).toEqual(rows.map((r) => [r.kind, 'confirmed', null]));
    // The ledger's mint and burn went as one settlement (their net), not a transaction each: they
    // are not outbox rows, and are linked to the settle row, which holds their outcome.
    expect(rows.filter((r) => r.kind === 'mint' || r.kind === 'burn')).toEqual([]);
    const ledger = await p.db.prisma.chainLedgerIntent.findMany({ orderBy: { id: 'asc' } });
    const settle = rows.filter((r) => r.kind === 'settle');
    expect(settle).toHaveLength(1);
    expect(ledger.map((r) => [r.kind, r.ref, r.status, r.settlementId, r.lastError])).toEqual([
      ['mint', 'ledger:1', 'settled', settle[0].id, null],
      ['burn', 'ledger:2', 'settled', settle[0].id, null],
    ]);
    expect(settle[0].payload).toMatchObject({
      settlementId: String(settle[0].id),
      epoch: 1,
      rows: 2,
      entries: [
        { stackId: stackId(t), tokenId: t, token: 0, delta: '999500' },
        { stackId: stackId(t), tokenId: t, token: 1, delta: '250000' },
      ],
    });
    expect(await c.contract('BandwidthToken').settled(settle[0].id)).toBe(true);
    // Sent without waiting: consecutive nonces, fewer blocks than transactions.
    const sent = rows;
    const nonces = sent.map((r) => r.nonce!);
    expect(nonces).toEqual(nonces.map((_, i) => nonces[0] + i));
    expect(new Set(sent.map((r) => r.blockNumber)).size).toBeLessThan(sent.length);

    expect(await c.contract('StackIdentity').ownerOf(t)).toBe(c.operator.address);
    const [cpv, epoch, head] = await c.contract('StackIdentity').stackOf(t);
    expect([cpv.map(Number), Number(epoch), head]).toEqual([[1500, 1000, 1000, 2000, 500], 2, 'cog://' + 'cd'.repeat(32) + '@2']);
    expect((await c.contract('BandwidthToken').balancesOf(t)).map(Number)).toEqual([999_500, 250_000, 0, 0, 15_000]);
    expect(await c.contract('SleeveRegistry').isAlive(recordKey('sleeve:ai:1:0000aaaa'))).toBe(false);
    expect(await c.contract('EpochAnchor').verify(2, '0x' + fold(evm, ipfs, sl))).toBe(true);
    expect(Number((await c.contract('NeedlecastRouter').routeOf('needle:aa')).shardCount)).toBe(2);
    const bb = await c.contract('NeedlecastRouter').routeOf('needle:bb');
    expect([bb.routeHash, Number(bb.status)]).toEqual(['0x' + hex32('r'), 2]);
    expect((await c.contract('QuellistTreasury').epochEmissionOf(2))[2].map(Number)).toEqual([150_000, 100_000, 100_000, 200_000]);
    expect((await c.contract('QuellistTreasury').emissionOf(t, 2))[1].map(Number)).toEqual([150_000, 100_000, 100_000, 200_000, 0]);

    expect((await p.db.prisma.stack.findUnique({ where: { id: stackId(t) } }))!.chainStatus).toBe('confirmed');
    expect((await p.db.prisma.sleeve.findUnique({ where: { id: 'sleeve:ai:1:0000aaaa' } }))!.chainStatus).toBe('confirmed');
    const anchor = await p.db.prisma.epochAnchor.findUnique({ where: { epoch: 2 } });
    expect(anchor?.chainStatus).toBe('confirmed');
    expect(anchor?.txHash).toBe(rows.find((r) => r.kind === 'anchor')!.txHash);

    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
    // The ledger rows count with their settle row's status.
    expect(await outboxStatus(p.db.prisma)).toEqual({ pending: 0, submitted: 0, confirmed: rows.length + 2, failed: 0 });
    // evmRoot source: the epoch's confirmed hashes in nonce order, 64 lowercase hex.
    const e2 = await cortexTxSource(p).txHashesForEpoch(2);
    expect(e2).toEqual(
      sent
        .filter((r) => r.epoch === 2)
        .sort((a, b) => a.nonce! - b.nonce!)
        .map((r) => r.txHash),
    );
    expect(e2.every((h) => /^[0-9a-f]{64}$/.test(h))).toBe(true);
    const mined = await c.provider.getTransaction('0x' + e2[0]);
    expect(mined?.to).toBe(c.suite.contracts.StackIdentity);
  });

  it('an idle round reads the pending rows and stops there: what is in flight is counted only when there is something to send', async () => {
    // The submitter's database, with its counts of the outbox's sent rows counted.
    let counts = 0;
    const db = {
      ...p.db,
      driver: {
        ...p.db.driver,
        query: ((text, params, o) => {
          if (/count\(\*\)/.test(text) && text.includes('"ChainOutbox"') && text.includes("'submitted'")) counts++;
          return p.db.driver.query(text, params, o);
        }) as typeof p.db.driver.query,
      },
    };
    const s = startSubmitter(db, c, p.log, { pollMs: 60_000, firstRound: Promise.resolve() });
    running.push(s);
    for (let i = 0; i < 5; i++) await s.tick();
    expect(counts).toBe(0);
    const t = 150;
    await insertStack(t);
    await enqueue('mintIdentity', stackId(t), { stackId: stackId(t), tokenId: t, owner: null, cpv: CPV }, 1);
    await s.tick();
    expect(counts).toBe(1);
    // Its rounds (no poll: 60 s) confirm it once its block is mined.
    const status = () => p.db.prisma.chainOutbox.findFirstOrThrow({ where: { ref: stackId(t) } }).then((r) => r.status);
    for (let i = 0; i < 100 && (await status()) !== 'confirmed'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await s.tick();
    }
    expect(await status()).toBe('confirmed');
  });

  it('idle rounds back the poll off, doubling up to idlePollMaxMs; a round with work, or waiting for its block, brings it back', async () => {
    // Rounds driven by tick(): the timer's polls are seconds apart, so the waits the rounds chose are read as they were set.
    // droppedAfterMs 60 s: the sent rows are read again on a new block only (2 s at most), not every 200 ms.
    const s = start({ pollMs: 1000, idlePollMaxMs: 8000, droppedAfterMs: 60_000, firstRound: Promise.resolve() });
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      await s.tick();
      waits.push(s.pollWaitMs());
    }
    // Each idle round doubles the wait (the start's own round may come first), up to the cap.
    expect(waits[0]).toBeLessThanOrEqual(2000);
    for (let i = 1; i < waits.length; i++) expect(waits[i]).toBe(Math.min(8000, waits[i - 1]! * 2));
    expect(waits.at(-1)).toBe(8000);
    // Work: the round that finds a pending row, and every round while its transaction waits for a
    // block, polls at pollMs again.
    const t = 151;
    await insertStack(t);
    await enqueue('mintIdentity', stackId(t), { stackId: stackId(t), tokenId: t, owner: null, cpv: CPV }, 1);
    await s.tick();
    expect(s.pollWaitMs()).toBe(1000);
    const status = () => p.db.prisma.chainOutbox.findFirstOrThrow({ where: { ref: stackId(t) } }).then((r) => r.status);
    let waited = 0;
    while ((await status()) !== 'confirmed' && waited++ < 100) {
      await s.tick();
      expect(s.pollWaitMs()).toBe(1000);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await status()).toBe('confirmed');
    // Nothing left: idle again, the wait grows.
    for (let i = 0; i < 100 && s.pollWaitMs() === 1000; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await s.tick();
    }
    expect(s.pollWaitMs()).toBeGreaterThan(1000);
  });

  it('fails a reverting or invalid intent with its reason and keeps the queue moving', async () => {
    const t = 200;
    await enqueue('mintIdentity', stackId(t), { stackId: stackId(t), tokenId: t, cpv: CPV });
    await enqueue('mintIdentity', 'stack:dup', { stackId: 'stack:dup', tokenId: t, cpv: CPV }); // same tokenId: reverts
    await enqueue('mintIdentity', 'stack:bad', { stackId: 'stack:bad', tokenId: t + 1, cpv: { ...CPV, syncCoeff: 3 } }); // never a valid call
    await enqueue('burn', 'ledger:x', { stackId: stackId(t), amounts: [{ token: 'sync', milli: '1' }] }); // nothing to burn
    await enqueue('mintIdentity', stackId(t + 2), { stackId: stackId(t + 2), tokenId: t + 2, cpv: CPV });
    const s = start();
    await s.idle(20_000);
    const rows = await p.db.prisma.chainOutbox.findMany({ orderBy: { id: 'asc' } });
    expect(rows.map((r) => r.status)).toEqual(['confirmed', 'failed', 'failed', 'confirmed']);
    expect(rows[1].lastError).toMatch(/ERC721InvalidSender/);
    expect(rows[2].lastError).toMatch(/invalid intent: cpv coefficient out of \[0, 2\]: 3/);
    expect(rows[2].txHash).toBeNull();
    // The burn of nothing fails as a ledger row, with the settlement's revert as its reason.
    const [burn] = await p.db.prisma.chainLedgerIntent.findMany();
    expect([burn.ref, burn.status, burn.settlementId]).toEqual(['ledger:x', 'failed', null]);
    expect(burn.lastError).toMatch(/InsufficientStackBalance/);
    expect(await outboxStatus(p.db.prisma)).toMatchObject({ failed: 3 });
    expect(await c.contract('StackIdentity').ownerOf(t + 2)).toBe(c.operator.address);
    const drift = await reconcileChain(p.db.prisma, c);
    expect(drift.map((d) => d.kind)).toEqual(['failed', 'failed', 'failed']);
  });

  it('restarted mid-outbox, loses nothing and sends nothing twice', async () => {
    const base = 300;
    const N = 30;
    for (let i = 0; i < N; i++) await enqueue('mintIdentity', stackId(base + i), { stackId: stackId(base + i), tokenId: base + i, cpv: CPV });
    const startNonce = await c.provider.getTransactionCount(c.operator.address, 'pending');
    // First run: batch 1 stored and broadcast, batch 2 stored then the process "dies" before broadcasting.
    let rounds = 0;
    let crashed!: () => void;
    const crash = new Promise<void>((r) => (crashed = r));
    const a = start({
      batchSize: 10,
      afterPersist: () => {
        if (++rounds === 2) {
          crashed();
          throw new Error('simulated crash');
        }
      },
    });
    await crash;
    await a.close();
    const mid = await outboxStatus(p.db.prisma);
    // Stored with nonce + signed bytes; the first batch may already be confirmed by now.
    expect(mid.submitted + mid.confirmed).toBe(20);
    expect(mid.pending).toBe(10);
    expect(await c.provider.getTransactionCount(c.operator.address, 'pending')).toBe(startNonce + 10);

    const b = start({ batchSize: 10 });
    await b.idle(20_000);
    const rows = await p.db.prisma.chainOutbox.findMany({ orderBy: { id: 'asc' } });
    expect(rows.every((r) => r.status === 'confirmed')).toBe(true);
    const nonces = rows.map((r) => r.nonce!).sort((x, y) => x - y);
    expect(nonces).toEqual(Array.from({ length: N }, (_, i) => startNonce + i));
    // Exactly one transaction per intent reached the chain.
    expect(await c.provider.getTransactionCount(c.operator.address, 'latest')).toBe(startNonce + N);
    for (let i = 0; i < N; i++) expect(await c.contract('StackIdentity').ownerOf(base + i)).toBe(c.operator.address);
    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
  });

  it('re-sends a dropped transaction (same bytes) until it lands', async () => {
    const t = 400;
    await c.provider.send('evm_setIntervalMining', [0]);
    try {
      await enqueue('mintIdentity', stackId(t), { stackId: stackId(t), tokenId: t, cpv: CPV });
      // Long enough that the submitter does not re-broadcast between the drop and the check that the
      // node forgot the transaction, even when a loaded machine is slow to get there.
      const s = start({ droppedAfterMs: 3000 });
      let row = await p.db.prisma.chainOutbox.findFirstOrThrow();
      for (let i = 0; i < 100 && row.status !== 'submitted'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        row = await p.db.prisma.chainOutbox.findFirstOrThrow();
      }
      expect(row.status).toBe('submitted');
      // Stored as submitted first, then broadcast.
      for (let i = 0; i < 200 && !(await c.provider.getTransaction('0x' + row.txHash)); i++) await new Promise((r) => setTimeout(r, 50));
      expect(await c.provider.getTransaction('0x' + row.txHash)).not.toBeNull();
      await c.provider.send('anvil_dropTransaction', ['0x' + row.txHash]);
      expect(await c.provider.getTransaction('0x' + row.txHash)).toBeNull();
      // The submitter notices (not in the mempool, older than droppedAfterMs) and re-broadcasts.
      for (let i = 0; i < 400 && !(await c.provider.getTransaction('0x' + row.txHash)); i++) await new Promise((r) => setTimeout(r, 50));
      expect(await c.provider.getTransaction('0x' + row.txHash)).not.toBeNull();
      await c.provider.send('evm_mine', []);
      await s.idle(10_000);
      const done = await p.db.prisma.chainOutbox.findFirstOrThrow();
      expect([done.status, done.txHash, done.nonce]).toEqual(['confirmed', row.txHash, row.nonce]);
      expect(done.attempts).toBeGreaterThanOrEqual(2);
      expect(await c.contract('StackIdentity').ownerOf(t)).toBe(c.operator.address);
    } finally {
      await c.provider.send('evm_setIntervalMining', [1]);
    }
  }, 60_000);

  it('a round over 2 s is logged with the time of each of its steps', async () => {
    // The step a slow round spent its time in (here the submit, held 2.1 s after persisting).
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    });
    const log = createLogger({ level: 'warn', destination });
    await enqueue('mintIdentity', stackId(600), { stackId: stackId(600), tokenId: 600, cpv: CPV });
    const s = startSubmitter(p.db, c, log, { pollMs: 50, droppedAfterMs: 400, afterPersist: () => new Promise((r) => setTimeout(r, 2100)) });
    running.push(s);
    const end = Date.now() + 20_000;
    while (!lines.some((l) => l.msg === 'cortex submitter: slow round') && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    const slow = lines.find((l) => l.msg === 'cortex submitter: slow round');
    expect(slow).toBeDefined();
    expect(slow!.submitMs as number).toBeGreaterThanOrEqual(2000);
    const steps = slow!.stepsMs as Record<string, number>;
    expect(Object.keys(steps)).toEqual(expect.arrayContaining(['ledger', 'build', 'estimate', 'sign', 'persist', 'broadcast']));
    // The 2.1 s are in none of the timed steps (the hold comes after persisting, before broadcasting).
    expect(Math.max(...Object.values(steps))).toBeLessThan(2000);
  });

  it('reconcile reports a database that claims what the chain does not have', async () => {
    const blockNumber = await c.provider.getBlockNumber();
    await p.db.prisma.chainOutbox.create({
      data: {
        kind: 'mintIdentity',
        ref: 'stack:ghost',
        payload: { stackId: 'stack:ghost', tokenId: 999, cpv: CPV },
        status: 'confirmed',
        nonce: 1,
        txHash: 'ab'.repeat(32),
        blockNumber,
      },
    });
    await p.db.prisma.chainOutbox.create({
      data: {
        kind: 'mint',
        ref: 'ledger:ghost',
        payload: { stackId: 'stack:ghost', amounts: [{ token: 'routing', milli: '7' }] },
        status: 'confirmed',
        nonce: 2,
        txHash: 'cd'.repeat(32),
        blockNumber,
      },
    });
    const drift = await reconcileChain(p.db.prisma, c);
    expect(drift.map((d) => `${d.kind}:${d.ref}`).sort()).toEqual(['balance:token:999:routing', 'identity:stack:ghost', 'supply:routing']);
  });
});

describe('cortex ledger settlements', () => {
  const mintRow = (t: number) => enqueue('mintIdentity', stackId(t), { stackId: stackId(t), tokenId: t, cpv: CPV });
  const ledger = (kind: 'mint' | 'burn', t: number, epoch: number, amounts: [string, number][]) =>
    enqueue(
      kind,
      `ledger:${kind}:${t}:${Math.random()}`,
      { stackId: stackId(t), amounts: amounts.map(([token, milli]) => ({ token, milli: String(milli) })) },
      epoch,
    );
  const balances = async (t: number) => (await c.contract('BandwidthToken').balancesOf(t)).map(Number);
  const settleRows = () => p.db.prisma.chainOutbox.findMany({ where: { kind: 'settle' }, orderBy: { id: 'asc' } });
  async function until(ok: () => Promise<boolean>, ms = 20_000) {
    const end = Date.now() + ms;
    while (!(await ok())) {
      if (Date.now() > end) throw new Error('timed out');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('a burns row (a group commit over several stacks) is split per stack before its epoch settles; a malformed one fails alone', async () => {
    const stacks = [810, 811, 812];
    for (const t of stacks) await mintRow(t);
    let epoch = 1;
    const s = start({ currentEpoch: () => epoch });
    for (const t of stacks) await ledger('mint', t, 1, [['compute', 10_000]]);
    const burns = (parts: Array<[number, number]>) =>
      enqueue(
        'burns',
        `ledger:test:${Math.random()}`,
        { stacks: parts.map(([t, milli]) => ({ stackId: stackId(t), amounts: [{ token: 'compute', milli: String(milli) }] })) },
        1,
      );
    await burns([
      [810, 500],
      [811, 700],
    ]);
    await burns([
      [811, 300],
      [812, 1000],
      [810, 1],
    ]);
    await enqueue('burns', 'ledger:test:bad', { stacks: [{ stackId: stackId(812), amounts: [{ token: 'compute', milli: 'lots' }] }] }, 1);
    await until(async () => (await p.db.prisma.chainOutbox.count({ where: { kind: 'mintIdentity', status: 'confirmed' } })) === 3);
    // Its epoch has not ended: not split yet.
    expect(await p.db.prisma.chainLedgerIntent.count({ where: { kind: 'burns', status: 'pending' } })).toBe(3);

    epoch = 2;
    await s.idle(20_000);
    expect(await balances(810)).toEqual([10_000 - 501, 0, 0, 0, 0]);
    expect(await balances(811)).toEqual([10_000 - 1000, 0, 0, 0, 0]);
    expect(await balances(812)).toEqual([10_000 - 1000, 0, 0, 0, 0]);
    const rows = await p.db.prisma.chainLedgerIntent.findMany({ where: { kind: { in: ['burn', 'burns'] } }, orderBy: { id: 'asc' } });
    // A burn row a stack (both burns rows summed), in the order the stacks first burned, settled in
    // the epoch's one settlement; the malformed row failed with why, the others unaffected.
    const [settle] = await settleRows();
    expect(rows.filter((r) => r.kind === 'burn').map((r) => [r.payload, r.status, r.settlementId])).toEqual([
      [{ stackId: stackId(810), amounts: [{ token: 'compute', milli: '501' }] }, 'settled', settle!.id],
      [{ stackId: stackId(811), amounts: [{ token: 'compute', milli: '1000' }] }, 'settled', settle!.id],
      [{ stackId: stackId(812), amounts: [{ token: 'compute', milli: '1000' }] }, 'settled', settle!.id],
    ]);
    expect(rows.filter((r) => r.kind === 'burns').map((r) => [r.ref, r.status, r.lastError])).toEqual([
      ['ledger:test:bad', 'failed', expect.stringMatching(/^invalid intent/)],
    ]);
    // The chain equals what was settled; the failed row is the one thing reconcile reports.
    expect(await reconcileChain(p.db.prisma, c)).toEqual([{ kind: 'failed', ref: 'ledger:test:bad', detail: expect.stringMatching(/^burns: invalid intent/) }]);
  });

  it('settles each ended epoch by net effect per stack in one call; the chain equals the ledger after each settlement', async () => {
    const stacks = [500, 501, 502];
    for (const t of stacks) await mintRow(t);
    let epoch = 1;
    const s = start({ currentEpoch: () => epoch });
    // Epoch 1: a grant each, then many small burns (a perceive each) and one mint.
    const want = new Map(stacks.map((t) => [t, [0, 0, 0, 0, 0]]));
    const apply = async (kind: 'mint' | 'burn', t: number, e: number, token: number, milli: number) => {
      await ledger(kind, t, e, [[['compute', 'memory', 'sync', 'routing', 'residue'][token], milli]]);
      want.get(t)![token] += kind === 'mint' ? milli : -milli;
    };
    for (const t of stacks) {
      await apply('mint', t, 1, 0, 100_000);
      await apply('mint', t, 1, 1, 50_000);
    }
    for (let i = 0; i < 30; i++) await apply('burn', stacks[i % 3], 1, 0, 500 + i);
    await apply('mint', 501, 1, 2, 7);
    // The epoch has not ended: the identities go out, the ledger rows wait.
    await until(async () => (await p.db.prisma.chainOutbox.count({ where: { kind: 'mintIdentity', status: 'confirmed' } })) === 3);
    expect(await settleRows()).toEqual([]);
    expect(await p.db.prisma.chainLedgerIntent.count({ where: { status: 'pending' } })).toBe(37);
    expect(await outboxStatus(p.db.prisma)).toMatchObject({ pending: 37 });

    epoch = 2;
    await s.idle(20_000);
    let settles = await settleRows();
    expect(settles).toHaveLength(1);
    expect((settles[0].payload as { entries: unknown[]; rows: number }).rows).toBe(37);
    // One entry per stack and token that moved: the net of 37 rows is 7 entries.
    expect((settles[0].payload as { entries: unknown[] }).entries).toHaveLength(7);
    for (const t of stacks) expect(await balances(t)).toEqual(want.get(t));
    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
    // A checker that lives on folds each block once: its next check reads only what landed since.
    const checker = driftChecker(p.db.prisma, c);
    expect(await checker.check()).toEqual([]);
    expect(await checker.check()).toEqual([]);

    // Epoch 2: a burn that empties a token, a late row of epoch 1 (committed after the epoch ended).
    await apply('burn', 500, 2, 1, 50_000);
    await apply('burn', 502, 1, 0, 1);
    await apply('mint', 502, 2, 0, 3);
    epoch = 3;
    await s.idle(20_000);
    settles = await settleRows();
    expect(settles).toHaveLength(2);
    expect(settles[1].payload).toMatchObject({ epoch: 2, rows: 3 });
    for (const t of stacks) expect(await balances(t)).toEqual(want.get(t));
    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
    // The balances it checks now are the sums of both settlements (a check that compared only this
    // window's rows with the chain would report every stack that moved).
    expect(await checker.check()).toEqual([]);
    // 3 identities and 2 settlements: 5 transactions for 40 ledger writes.
    const sent = await p.db.prisma.chainOutbox.findMany({ where: { nonce: { not: null } } });
    expect(sent.map((r) => r.kind).sort()).toEqual(['mintIdentity', 'mintIdentity', 'mintIdentity', 'settle', 'settle']);
    // Every ledger row rides on a confirmed settlement, each settlement's rows linked to it.
    const linked = await p.db.prisma.chainLedgerIntent.groupBy({ by: ['status', 'settlementId'], _count: { _all: true }, orderBy: { settlementId: 'asc' } });
    expect(linked.map((g) => [g.status, g.settlementId, g._count._all])).toEqual([
      ['settled', settles[0].id, 37],
      ['settled', settles[1].id, 3],
    ]);
    expect(await outboxStatus(p.db.prisma)).toEqual({ pending: 0, submitted: 0, confirmed: 5 + 40, failed: 0 });

    // A settlement the database claims in a new block and the chain never saw: the running checker
    // finds it in its next window, on top of what it folded before.
    await c.provider.send('evm_mine', []);
    const blockNumber = await c.provider.getBlockNumber();
    const ghost = await p.db.prisma.chainOutbox.create({
      data: { kind: 'settle', ref: 'settle:9', epoch: 9, payload: {}, status: 'confirmed', nonce: 99, txHash: 'ef'.repeat(32), blockNumber },
    });
    await p.db.prisma.chainLedgerIntent.create({
      data: {
        kind: 'mint',
        ref: 'ledger:ghost',
        epoch: 9,
        payload: { stackId: stackId(501), amounts: [{ token: 'sync', milli: '5' }] },
        status: 'settled',
        settlementId: ghost.id,
      },
    });
    const drift = await checker.check();
    expect(drift.map((d) => `${d.kind}:${d.ref}`).sort()).toEqual([`settlement:settlement:${ghost.id}`, 'supply:sync', 'balance:token:501:sync'].sort());
    expect(drift.find((d) => d.kind === 'balance')!.detail).toBe(`Cortex ${want.get(501)![2]}, database ${want.get(501)![2] + 5} (milli)`);
  });

  it("reconcile sums a settlement's ledger rows in the database; a row not in the ledger's form is read the general way", async () => {
    // A settlement the chain never saw, with rows of every form a ledger row can take.
    const blockNumber = await c.provider.getBlockNumber();
    const ghost = await p.db.prisma.chainOutbox.create({
      data: { kind: 'settle', ref: 'settle:7', epoch: 7, payload: {}, status: 'confirmed', nonce: 1, txHash: 'ab'.repeat(32), blockNumber },
    });
    const row = (kind: 'mint' | 'burn', payload: Record<string, unknown>) =>
      p.db.prisma.chainLedgerIntent.create({
        data: { kind, ref: `ledger:${Math.random()}`, epoch: 7, payload: payload as never, status: 'settled', settlementId: ghost.id },
      });
    const s = stackId(777);
    await row('mint', { stackId: s, amounts: [{ token: 'compute', milli: '1000' }] });
    await row('mint', { stackId: s, amounts: [{ token: 'compute', milli: 234 }] }); // a JSON number
    await row('burn', { stackId: s, amounts: [{ token: 'compute', milli: '200' }] });
    await row('mint', { tokenId: 777, amounts: [{ token: 'memory', milli: '5' }] }); // by token id
    await row('mint', { stackId: s, amounts: [{ token: 'sync', milli: '0x10' }] }); // not the ledger's form: 16, read as before
    await row('mint', { stackId: s, amounts: [{ token: 'routing', milli: '0' }] }); // nothing moved: no balance to check
    await row('mint', { stackId: 'stack:unknown', amounts: [{ token: 'residue', milli: '9' }] }); // no token: never settled, no balance
    const drift = await reconcileChain(p.db.prisma, c);
    expect(drift.map((d) => `${d.kind}:${d.ref}`).sort()).toEqual(
      [
        `settlement:settlement:${ghost.id}`,
        'balance:token:777:compute',
        'balance:token:777:memory',
        'balance:token:777:sync',
        'supply:compute',
        'supply:memory',
        'supply:sync',
      ].sort(),
    );
    const detail = (ref: string) => drift.find((d) => d.ref === ref)!.detail;
    expect(detail('token:777:compute')).toBe('Cortex 0, database 1034 (milli)');
    expect(detail('token:777:memory')).toBe('Cortex 0, database 5 (milli)');
    expect(detail('token:777:sync')).toBe('Cortex 0, database 16 (milli)');
    // A row the chain could never carry fails the check, as it did when every row was read here.
    await row('mint', { stackId: s, amounts: [{ token: 'gold', milli: '1' }] });
    await expect(reconcileChain(p.db.prisma, c)).rejects.toThrow('unknown token gold');
    await row('burn', { stackId: s, amounts: [{ token: 'compute', milli: '-1' }] });
    await p.db.prisma.chainLedgerIntent.deleteMany({ where: { payload: { path: ['amounts', '0', 'token'], equals: 'gold' } } });
    await expect(reconcileChain(p.db.prisma, c)).rejects.toThrow('negative amount');
    // A row without amounts is no sum either (a NULL test must not drop it): read the general way, it fails.
    await p.db.prisma.chainLedgerIntent.deleteMany({ where: { kind: 'burn', payload: { path: ['amounts', '0', 'milli'], equals: '-1' } } });
    await row('mint', { stackId: s });
    await expect(reconcileChain(p.db.prisma, c)).rejects.toThrow('amounts missing');
  });

  it('a settlement sent again (re-signed after a crash) does not apply twice', async () => {
    await mintRow(600);
    await ledger('mint', 600, 1, [['compute', 9000]]);
    await ledger('burn', 600, 1, [['compute', 1000]]);
    const a = start();
    await a.idle(20_000);
    await a.close();
    const [first] = await settleRows();
    expect(await balances(600)).toEqual([8000, 0, 0, 0, 0]);
    const nonceBefore = await c.provider.getTransactionCount(c.operator.address, 'latest');
    // As after a crash that lost the row's signed bytes (or a nonce taken by another sender): the
    // same settlement goes back to pending and is signed again with a new nonce.
    await p.db.prisma.chainOutbox.update({
      where: { id: first.id },
      data: { status: 'pending', nonce: null, txHash: null, rawTx: null, sentAt: null, blockNumber: null },
    });
    const b = start();
    await b.idle(20_000);
    const again = await p.db.prisma.chainOutbox.findUniqueOrThrow({ where: { id: first.id } });
    expect(again.status).toBe('confirmed');
    expect(again.txHash).not.toBe(first.txHash);
    expect(await c.provider.getTransactionCount(c.operator.address, 'latest')).toBe(nonceBefore + 1); // it was sent and mined
    expect(await balances(600)).toEqual([8000, 0, 0, 0, 0]); // and changed nothing
    const bt = c.contract('BandwidthToken');
    expect(await bt.queryFilter(bt.filters.Settled(first.id))).toHaveLength(1);
    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
  });

  it('a settlement held back while transactions are in flight is not planned again until a block lands; epochs that end meanwhile settle the other stacks', async () => {
    await mintRow(900);
    await mintRow(901);
    let epoch = 1;
    const s = start({ currentEpoch: () => epoch });
    await until(async () => (await p.db.prisma.chainOutbox.count({ where: { kind: 'mintIdentity', status: 'confirmed' } })) === 2);
    await c.provider.send('evm_setIntervalMining', [0]);
    const estimates = vi.spyOn(c.provider, 'estimateGas');
    try {
      // 901's grant goes out in epoch 1's settlement, and no block lands: it stays in flight.
      await ledger('mint', 901, 1, [['compute', 9000]]);
      epoch = 2;
      await until(async () => (await settleRows()).some((r) => r.status === 'submitted'));
      // 900 never had a grant: its burn reverts, and while a transaction is in flight that could
      // change the answer, it waits rather than fails.
      await ledger('burn', 900, 2, [['compute', 1000]]);
      const before = estimates.mock.calls.length;
      epoch = 3;
      await until(async () => estimates.mock.calls.length > before);
      await new Promise((r) => setTimeout(r, 250));
      const held = estimates.mock.calls.length;
      await new Promise((r) => setTimeout(r, 1000)); // about 20 rounds of 50 ms, no block
      expect(estimates.mock.calls.length).toBe(held);
      const burn900 = () => p.db.prisma.chainLedgerIntent.findFirstOrThrow({ where: { kind: 'burn', payload: { path: ['stackId'], equals: stackId(900) } } });
      expect((await burn900()).status).toBe('pending');
      // An epoch that ends meanwhile settles its rows of the stack not held, still without a block.
      await ledger('burn', 901, 3, [['compute', 500]]);
      epoch = 4;
      await until(async () => (await settleRows()).length === 2);
      expect((await settleRows())[1].payload).toMatchObject({ epoch: 3, rows: 1, entries: [{ tokenId: 901, delta: '-500' }] });
      expect((await burn900()).status).toBe('pending');
    } finally {
      estimates.mockRestore();
      await c.provider.send('evm_setIntervalMining', [1]); // seconds, as the file's node was started
    }
    // Blocks again: both settlements land, and the next full pass finds 900's part still reverting
    // with nothing in flight: it fails alone.
    await until(async () => (await p.db.prisma.chainLedgerIntent.count({ where: { status: 'pending' } })) === 0);
    await s.idle(20_000);
    expect((await settleRows()).map((r) => r.status)).toEqual(['confirmed', 'confirmed']);
    expect(await balances(901)).toEqual([8500, 0, 0, 0, 0]);
    expect((await p.db.prisma.chainLedgerIntent.findMany({ orderBy: { id: 'asc' } })).map((r) => [r.kind, r.status])).toEqual([
      ['mint', 'settled'],
      ['burn', 'failed'],
      ['burn', 'settled'],
    ]);
    expect((await reconcileChain(p.db.prisma, c)).map((d) => d.kind)).toEqual(['failed']);
  });

  it('an epoch that ends while a round confirms is settled and sent before the confirm writes its outcomes', async () => {
    await mintRow(950);
    let epoch = 1;
    const s = start({ currentEpoch: () => epoch });
    await until(async () => (await p.db.prisma.chainOutbox.count({ where: { kind: 'mintIdentity', status: 'confirmed' } })) === 1);
    await ledger('mint', 950, 1, [['compute', 4000]]);
    // A slow node (the boundary, not the submitter): the receipt of the next identity takes 1.5 s,
    // and the epoch ends while the round waits for it.
    await mintRow(951);
    const send = c.provider.send.bind(c.provider);
    let heldAt = 0;
    const slow = vi.spyOn(c.provider, 'send').mockImplementation(async (method: string, params: unknown[] | Record<string, unknown>) => {
      const answer = await send(method, params);
      if (method === 'eth_getTransactionReceipt' && answer && !heldAt) {
        const row = await p.db.prisma.chainOutbox.findFirst({ where: { kind: 'mintIdentity', ref: stackId(951) } });
        if (row?.txHash && (params as string[])[0] === `0x${row.txHash}`) {
          heldAt = Date.now();
          epoch = 2;
          await new Promise((r) => setTimeout(r, 1500));
        }
      }
      return answer;
    });
    try {
      await s.idle(20_000);
    } finally {
      slow.mockRestore();
    }
    expect(heldAt).toBeGreaterThan(0);
    const [settleRow] = await settleRows();
    const identity = await p.db.prisma.chainOutbox.findFirstOrThrow({ where: { kind: 'mintIdentity', ref: stackId(951) } });
    expect(settleRow.payload).toMatchObject({ epoch: 1, rows: 1 });
    // Sent between the receipts and their outcomes, not after the round: before the identity was
    // marked confirmed.
    expect(settleRow.sentAt!.getTime()).toBeLessThan(identity.updatedAt.getTime());
    expect(await balances(950)).toEqual([4000, 0, 0, 0, 0]);
    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
  });

  it('a stack whose part cannot apply fails alone; the others settle', async () => {
    await mintRow(700);
    await mintRow(701);
    await ledger('mint', 700, 1, [['memory', 4000]]);
    await ledger('burn', 701, 1, [['compute', 5]]); // 701 never held compute
    await ledger('burn', 700, 1, [['memory', 1000]]);
    const s = start();
    await s.idle(20_000);
    const rows = await p.db.prisma.chainLedgerIntent.findMany({ orderBy: { id: 'asc' } });
    expect(rows.map((r) => r.status)).toEqual(['settled', 'failed', 'settled']);
    expect(rows[1].lastError).toMatch(/InsufficientStackBalance\(701, 0, 0, 5\)/);
    expect(await balances(700)).toEqual([0, 3000, 0, 0, 0]);
    expect((await reconcileChain(p.db.prisma, c)).map((d) => d.kind)).toEqual(['failed']);
  });

  it('an epoch that outlasts settleAfterMs is cut where it stands: all its rows so far in one settlement, the rest at its end', async () => {
    await mintRow(800);
    let epoch = 1;
    const s = start({ currentEpoch: () => epoch, settleAfterMs: 2500 });
    await until(async () => (await p.db.prisma.chainOutbox.count({ where: { kind: 'mintIdentity', status: 'confirmed' } })) === 1);
    await ledger('mint', 800, 1, [['compute', 9000]]);
    await new Promise((r) => setTimeout(r, 700));
    await ledger('burn', 800, 1, [['compute', 1000]]);
    // Neither row is settled while the oldest is younger than settleAfterMs (the epoch has not ended).
    await new Promise((r) => setTimeout(r, 300));
    expect(await settleRows()).toEqual([]);
    // Once the first passes it, both go in one settlement (the second is younger than the limit).
    await until(async () => (await settleRows()).length === 1, 10_000);
    expect((await settleRows())[0].payload).toMatchObject({ epoch: 1, rows: 2 });
    await ledger('burn', 800, 1, [['compute', 500]]);
    epoch = 2;
    await s.idle(20_000);
    const settles = await settleRows();
    expect(settles.map((r) => (r.payload as { rows: number }).rows)).toEqual([2, 1]);
    expect(await balances(800)).toEqual([7500, 0, 0, 0, 0]);
    expect(await reconcileChain(p.db.prisma, c)).toEqual([]);
  });
});
