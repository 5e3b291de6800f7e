// Recall's hot path (flows/recall.ts): the stack with its payer, the walk and the spend with the
// read's drift are three statements through the driver and none through Prisma; the spend writes
// what the transactional path writes (balance, the posting's two ledger entries, the burn intent,
// drift and seen head, the stack's activity mark in a new epoch: a second statement then), and declines, writing nothing,
// when the transaction has something to say the one statement does not: a frozen or short sleeve
// (the precise 409 / 402). On PGlite and on PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { countStatements } from './helpers/statements.ts';
import { expectBurned } from './helpers/burns.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { freezeSleeve, spawnSleeve, spendForRead, syncSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { balanceOf, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { lastActiveEpochs } from '../subgraphs/economy/accrual.ts';
import { perceive } from '../flows/memory.ts';
import { parseCid, payloadKey } from '../subgraphs/memory/index.ts';
import { recall } from '../flows/recall.ts';

for (const db of ['pglite', 'postgres'] as const) {
  describe(`recall statements on ${db}`, () => {
    let t: MemoryTestApp;
    beforeAll(async () => {
      t = await memoryTestAppOn(db);
      t.p.setEpoch(1);
      const local = t.p.ports.hippocampus!;
      t.p.ports.hippocampus = { ...local, walk: (...a) => (walks++, local.walk(...a)) };
    });
    afterAll(async () => {
      await t?.close();
    });

    const counted = <T>(fn: () => Promise<T>) => countStatements(t.p.db, fn);

    const sleeveRow = (id: string) => t.p.db.prisma.sleeve.findUniqueOrThrow({ where: { id } });
    /** Walks that went to the Hippocampus (the port), not read with the stack. */
    let walks = 0;

    it('two driver statements, no Prisma, no Hippocampus call; the rows the transactional spend writes; the first spend of an epoch marks the stack active', async () => {
      const stack = await createStack(t.p, { name: 'recall-statements' });
      const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'memory', shape: 'B' }); // 1000 memory
      await perceive(t.p, { sleeveId: sleeve.id, text: 'one' });
      await perceive(t.p, { sleeveId: sleeve.id, text: 'two' });
      const before = await sleeveRow(sleeve.id);
      const r = await counted(() => recall(t.p, { stackId: stack.id, depth: 5 }));
      expect(r.value).toMatchObject({ sleeveId: sleeve.id, levels: 2, cost: { memory: 2 }, fidelity: 1, residueId: null });
      expect(r.value.fragments.map((f) => f.text)).toEqual(['two', 'one']);
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 0, driver: 2 });
      expect(walks).toBe(0);
      expect((await balanceOf(t.p.db.prisma, sleeveAccount(sleeve.id))).memory).toBe(998);
      const after = await sleeveRow(sleeve.id);
      expect(after.driftMilli - before.driftMilli).toBe(100);
      expect(after.seenHead).toBe(r.value.head);
      await expectBurned(t.p.db, { reason: 'recall', sleeveId: sleeve.id, stackId: stack.id, token: 'memory', milli: 2000n, epoch: 1 });

      // Epoch 2: the stack has not been active in it; the spend's statement finds the mark due and runs
      // again with it (as markStackActive would mark it): three statements, once per stack and epoch.
      t.p.setEpoch(2);
      expect((await lastActiveEpochs(t.p.db.prisma, [stack.id])).get(stack.id)).toBe(1);
      const first = await counted(() => recall(t.p, { stackId: stack.id, depth: 5 }));
      expect({ prisma: first.prisma, driver: first.driver }).toEqual({ prisma: 0, driver: 3 });
      expect((await lastActiveEpochs(t.p.db.prisma, [stack.id])).get(stack.id)).toBe(2);
      const next = await counted(() => recall(t.p, { stackId: stack.id, depth: 5 }));
      expect({ prisma: next.prisma, driver: next.driver }).toEqual({ prisma: 0, driver: 2 });
      expect(walks).toBe(0);
      expect((await balanceOf(t.p.db.prisma, sleeveAccount(sleeve.id))).memory).toBe(994);
      expect(await t.p.db.prisma.ledgerEntry.count({ where: { reason: 'recall', ref: sleeve.id } })).toBe(6);
    });

    it('reads the walk with the stack, as deep as the payer pays for; a walk its rows do not cover (a payload in the object store) goes to the Hippocampus', async () => {
      const stack = await createStack(t.p, { name: 'recall-walk' });
      const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'memory', shape: 'B' });
      const cids: string[] = [];
      for (const text of ['n1', 'n2', 'n3', 'n4']) cids.push((await perceive(t.p, { sleeveId: sleeve.id, text })).cid);
      walks = 0;
      // Named sleeve, depth capped by memoryToken; then the stack's payer, capped by its balance.
      const bySleeve = await recall(t.p, { stackId: stack.id, sleeveId: sleeve.id, depth: 10, memoryToken: 3 });
      expect(bySleeve.fragments.map((f) => f.text)).toEqual(['n4', 'n3', 'n2']);
      await t.p.db.prisma.balance.update({ where: { account_token: { account: sleeveAccount(sleeve.id), token: 'memory' } }, data: { milli: 2500n } });
      const capped = await recall(t.p, { stackId: stack.id, depth: 10 });
      expect(capped).toMatchObject({ effectiveDepth: 2, levels: 2, fidelity: 1 });
      expect(capped.fragments.map((f) => f.text)).toEqual(['n4', 'n3']);
      expect(walks).toBe(0);
      await t.p.db.prisma.balance.update({ where: { account_token: { account: sleeveAccount(sleeve.id), token: 'memory' } }, data: { milli: 100_000n } });

      // n2's payload moved to the object store (as a node written before payloads were kept in rows).
      const row = await t.p.db.prisma.memoryNode.findUniqueOrThrow({ where: { cid: cids[1]! } });
      await t.p.objects.put(payloadKey(parseCid(cids[1]!)!.hash), new TextEncoder().encode(row.payload!));
      await t.p.db.prisma.memoryNode.update({ where: { cid: cids[1]! }, data: { payload: null } });
      const r = await recall(t.p, { stackId: stack.id, depth: 10 });
      expect(walks).toBe(1);
      expect(r).toMatchObject({ levels: 4, fidelity: 1, broken: [] });
      expect(r.fragments.map((f) => f.text)).toEqual(['n4', 'n3', 'n2', 'n1']);
    });

    it('a walk longer than one chunk of rows (several rows of the read) is still two statements and the whole walk, newest first', async () => {
      const stack = await createStack(t.p, { name: 'recall-chunks' });
      const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'memory', shape: 'B' });
      // Writes in batches of ten (a sleeve is flagged past COG_DRIFT_MAX unsynced writes).
      const texts = Array.from({ length: 230 }, (_, i) => `deep ${i}`);
      for (let i = 0; i < texts.length; i += 10) {
        await syncSleeve(t.p, sleeve.id);
        for (const text of texts.slice(i, i + 10)) await perceive(t.p, { sleeveId: sleeve.id, text });
      }
      walks = 0;
      const r = await counted(() => recall(t.p, { stackId: stack.id, depth: 230 }));
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 0, driver: 2 });
      expect(walks).toBe(0);
      expect(r.value).toMatchObject({ levels: 230, fidelity: 1, broken: [], cost: { memory: 230 } });
      expect(r.value.fragments.map((f) => f.text)).toEqual([...texts].reverse());
    });

    it('declines, writing nothing, for a frozen sleeve or a short balance; the recall then answers as the transaction does', async () => {
      const stack = await createStack(t.p, { name: 'recall-declines' });
      const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'memory', shape: 'B' });
      await perceive(t.p, { sleeveId: sleeve.id, text: 'one' });
      const epoch = t.p.epochs.current();
      const read = { head: null, driftMilli: 100 };
      const meta = { reason: 'recall', ref: sleeve.id, epoch };
      const entries = () => t.p.db.prisma.ledgerEntry.count({ where: { reason: 'recall', ref: sleeve.id } });
      const held = await balanceOf(t.p.db.prisma, sleeveAccount(sleeve.id));
      const drift = (await sleeveRow(sleeve.id)).driftMilli;
      const short = await spendForRead(t.p.db, sleeve, { token: 'memory', milli: 10_000_000n }, read, meta);
      expect(short).toBe(false);
      await t.p.db.prisma.$transaction((tx) => freezeSleeve(tx, sleeve.id));
      const frozen = await spendForRead(t.p.db, sleeve, { token: 'memory', milli: 1000n }, read, meta);
      expect(frozen).toBe(false);
      expect(await balanceOf(t.p.db.prisma, sleeveAccount(sleeve.id))).toEqual(held);
      expect(await entries()).toBe(0);
      expect((await sleeveRow(sleeve.id)).driftMilli).toBe(drift);
      // A frozen sleeve is no stack-level payer, and named it is the 409.
      expect(await recall(t.p, { stackId: stack.id, depth: 2 })).toMatchObject({ sleeveId: null, levels: 0, cost: { memory: 0 } });
      await expect(recall(t.p, { stackId: stack.id, sleeveId: sleeve.id, depth: 2 })).rejects.toMatchObject({ status: 409, code: 'SLEEVE_FROZEN' });
      await expect(recall(t.p, { stackId: 'stack:nope', depth: 2 })).rejects.toMatchObject({ status: 404 });
      await expect(recall(t.p, { stackId: '', depth: 2 })).rejects.toMatchObject({ status: 404 });
    });
  });
}
