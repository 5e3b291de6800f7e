// A sleeve's sync as one statement through the driver (subgraphs/sleeves/sleeves.ts syncStatement):
// the rows the transactional sync writes, the head as the stack lock found it, its event; and the
// refusals, which leave nothing behind, as the transaction gives them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { countStatements } from './helpers/statements.ts';
import { expectBurned } from './helpers/burns.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { decommissionSleeve, freezeSleeve, spawnSleeve, syncSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { balanceOf, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { perceive } from '../flows/memory.ts';

for (const db of ['pglite', 'postgres'] as const) {
  describe(`sync statement on ${db}`, () => {
    let t: MemoryTestApp;
    beforeAll(async () => {
      t = await memoryTestAppOn(db);
      t.p.setEpoch(3);
    });
    afterAll(async () => {
      await t?.close();
    });

    const counted = <T>(fn: () => Promise<T>) => countStatements(t.p.db, fn);

    const sleeveRow = (id: string) => t.p.db.prisma.sleeve.findUniqueOrThrow({ where: { id } });
    const syncEvents = (sleeveId: string) =>
      t.p.db.prisma.eventOutbox
        .findMany({ orderBy: { id: 'asc' } })
        .then((rows) =>
          rows.filter((r) => (r.data as { sleeveId?: string; what?: string }).sleeveId === sleeveId && (r.data as { what?: string }).what === 'sync'),
        );

    it('one driver statement: the token burned with its ledger legs and burn intent, drift cleared, the sleeve on the head, its event', async () => {
      const stack = await createStack(t.p, { name: 'sync-statement' });
      const a = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' }); // 500 sync
      const b = await spawnSleeve(t.p, { stackId: stack.id, kind: 'memory', shape: 'B' });
      await perceive(t.p, { sleeveId: a.id, text: 'a1' });
      await perceive(t.p, { sleeveId: a.id, text: 'a2' });
      // b writes last: the head is b's node, which a has not seen; a's drift is 2.
      const { cid: head } = await perceive(t.p, { sleeveId: b.id, text: 'b1' });
      await t.p.db.prisma.sleeve.update({ where: { id: a.id }, data: { flagged: true } });
      const before = await sleeveRow(a.id);
      expect(before.driftMilli).toBe(2000);
      expect(before.seenHead).not.toBe(head);

      const r = await counted(() => syncSleeve(t.p, a.id));
      expect(r.value).toEqual({ ok: true, epoch: 3 });
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 0, driver: 1 });

      const after = await sleeveRow(a.id);
      expect(after).toMatchObject({ driftMilli: 0, flagged: false, syncEpoch: 3, seenHead: head, alive: true });
      expect(after.lastSync!.getTime()).toBeGreaterThan(Date.now() - 60_000);
      expect((await balanceOf(t.p.db.prisma, sleeveAccount(a.id))).sync).toBe(499);
      await expectBurned(t.p.db, { reason: 'sync', sleeveId: a.id, stackId: stack.id, token: 'sync', milli: 1000n, epoch: 3 });
      const [ev, ...more] = await syncEvents(a.id);
      expect(more).toEqual([]);
      expect(ev!.subject).toBe(`cog.sleeve.changed.${stack.id}`);
      expect(ev!.msgId).toMatch(/^[0-9a-f-]{36}$/);
      expect(ev!.data).toMatchObject({
        type: 'sleeve.changed',
        stackId: stack.id,
        sleeveId: a.id,
        kind: 'ai',
        alive: true,
        frozen: false,
        tickRate: before.tickRate,
        what: 'sync',
      });
      expect(typeof (ev!.data as { ts?: unknown }).ts).toBe('number');

      // A second sync: its own event, one more token.
      await syncSleeve(t.p, a.id);
      expect((await balanceOf(t.p.db.prisma, sleeveAccount(a.id))).sync).toBe(498);
      expect(await syncEvents(a.id)).toHaveLength(2);
    });

    it('refusals leave nothing behind: 402 when short, 409 frozen or decommissioned, 404 unknown', async () => {
      const stack = await createStack(t.p, { name: 'sync-refusals' });
      const s = await spawnSleeve(t.p, { stackId: stack.id, kind: 'human', shape: 'B' });
      await perceive(t.p, { sleeveId: s.id, text: 'x' });
      const entries = () => t.p.db.prisma.ledgerEntry.count({ where: { reason: 'sync', ref: s.id } });

      // Short: the balance is emptied by a sweep of the sync tokens to the pool.
      const held = await balanceOf(t.p.db.prisma, sleeveAccount(s.id));
      await t.p.db.prisma.balance.update({ where: { account_token: { account: sleeveAccount(s.id), token: 'sync' } }, data: { milli: 999n } });
      const drift = (await sleeveRow(s.id)).driftMilli;
      await expect(syncSleeve(t.p, s.id)).rejects.toMatchObject({ status: 402, code: 'INSUFFICIENT_TOKENS' });
      expect(await entries()).toBe(0);
      expect((await sleeveRow(s.id)).driftMilli).toBe(drift);
      expect(await syncEvents(s.id)).toEqual([]);
      await t.p.db.prisma.balance.update({
        where: { account_token: { account: sleeveAccount(s.id), token: 'sync' } },
        data: { milli: BigInt(held.sync * 1000) },
      });

      await t.p.db.prisma.$transaction((tx) => freezeSleeve(tx, s.id));
      await expect(syncSleeve(t.p, s.id)).rejects.toMatchObject({ status: 409, code: 'SLEEVE_FROZEN' });
      await t.p.db.prisma.sleeve.update({ where: { id: s.id }, data: { frozen: false } });
      await decommissionSleeve(t.p, s.id, 'test');
      await expect(syncSleeve(t.p, s.id)).rejects.toMatchObject({ status: 409, code: 'SLEEVE_DECOMMISSIONED' });
      expect(await entries()).toBe(0);
      expect(await syncEvents(s.id)).toEqual([]);
      await expect(syncSleeve(t.p, 'sleeve:nope')).rejects.toMatchObject({ status: 404 });
    });
  });
}
