// The pin route's write (flows/memory.ts pinNode): the sleeve and the node read first, then the
// memory token's burn and the pin as one statement through the driver (sleeves' spendWithParts
// with memory's pinNodePart), no interactive transaction and no network call while rows are
// locked; refusals that leave nothing behind; concurrent pins that charge exactly once a node and
// never beyond the balance; the Hippocampus asked to replicate an API-stored node only after the
// commit. On PGlite and on PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { countStatements } from './helpers/statements.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { decommissionSleeve, spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { SYSTEM, balanceOf, burn, sleeveAccount, toMilli } from '../subgraphs/economy/ledger.ts';
import { computeDataCid } from '../subgraphs/memory/hippocampus/cid.ts';
import { nodePinState, putNode } from '../subgraphs/memory/hippocampus/store.ts';
import type { HippocampusClient } from '../subgraphs/memory/index.ts';
import { perceive, pinNode } from '../flows/memory.ts';

for (const engine of ['pglite', 'postgres'] as const) {
  describe(`the pin on ${engine}`, () => {
    let t: MemoryTestApp;
    const EPOCH = 6;
    beforeAll(async () => {
      t = await memoryTestAppOn(engine);
      t.p.setEpoch(EPOCH);
    });
    afterAll(async () => {
      await t?.close();
    });

    const prisma = () => t.p.db.prisma;
    const memoryOf = async (sleeveId: string) => (await balanceOf(prisma(), sleeveAccount(sleeveId))).memory;
    const pinnedOf = async (cid: string) => (await prisma().memoryNode.findUniqueOrThrow({ where: { cid } })).pinned;
    const pinEntries = (cid: string) =>
      prisma().ledgerEntry.findMany({
        where: { reason: 'pin', ref: cid },
        orderBy: { id: 'asc' },
        select: { txId: true, account: true, token: true, milli: true, epoch: true },
      });
    const sleeveOn = async (name: string) => {
      const stack = await createStack(t.p, { name });
      const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
      return { stack, sleeve };
    };
    const write = async (sleeveId: string, text: string) => (await perceive(t.p, { sleeveId, text, field: 'input' })).cid;
    /** Leaves the sleeve `keep` memory tokens (the rest burned). */
    const drainMemory = async (sleeve: { id: string; stackId: string }, keep: number) => {
      const have = await memoryOf(sleeve.id);
      await prisma().$transaction((tx) =>
        burn(tx, sleeveAccount(sleeve.id), [{ token: 'memory', milli: toMilli(have - keep) }], { reason: 'test-drain', epoch: EPOCH, stackId: sleeve.stackId }),
      );
      expect(await memoryOf(sleeve.id)).toBe(keep);
    };
    const counts = async () => ({
      entries: await prisma().ledgerEntry.count(),
      pinned: await prisma().memoryNode.count({ where: { pinned: true } }),
      ledgerIntents: await prisma().chainLedgerIntent.count(),
      outbox: await prisma().chainOutbox.count(),
      events: await prisma().eventOutbox.count(),
    });

    it('a pin is two reads and one driver statement: 1 memory burned by one balanced posting, the node pinned', async () => {
      const { sleeve } = await sleeveOn('pin-one');
      const cid = await write(sleeve.id, 'pin me');
      const before = await memoryOf(sleeve.id);
      expect(await pinnedOf(cid)).toBe(false);

      const r = await countStatements(t.p.db, () => pinNode(t.p, cid, sleeve.id));
      expect(r.value).toEqual({ cid, pinned: true, cost: { memory: 1 } });
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 2, driver: 1 });
      expect(await pinnedOf(cid)).toBe(true);
      expect(await memoryOf(sleeve.id)).toBe(before - 1);
      const entries = await pinEntries(cid);
      expect(entries.map(({ txId: _, ...e }) => e)).toEqual([
        { account: sleeveAccount(sleeve.id), token: 'memory', milli: -1000n, epoch: EPOCH },
        { account: SYSTEM.burn, token: 'memory', milli: 1000n, epoch: EPOCH },
      ]);
      expect(entries[0]!.txId).toBe(entries[1]!.txId);
      // The burn is mirrored like every other: one intent row naming the stack.
      const intents = await prisma().chainLedgerIntent.findMany({ where: { ref: `ledger:${entries[0]!.txId}` } });
      expect(intents).toHaveLength(1);
      expect(intents[0]!.payload).toEqual({ stackId: sleeve.stackId, amounts: [{ token: 'memory', milli: '1000' }] });

      // Pinned already: no charge, no write.
      const again = await countStatements(t.p.db, () => pinNode(t.p, cid, sleeve.id));
      expect(again.value).toEqual({ cid, pinned: true, cost: { memory: 0 } });
      expect({ prisma: again.prisma, driver: again.driver }).toEqual({ prisma: 2, driver: 0 });
      expect(await memoryOf(sleeve.id)).toBe(before - 1);
      expect(await pinEntries(cid)).toHaveLength(2);
    });

    it('refusals (404, 403, 409, 402) leave every table as it was', async () => {
      const { stack, sleeve } = await sleeveOn('pin-refusals');
      const cid = await write(sleeve.id, 'not for everyone');
      const other = await sleeveOn('pin-other');
      const gone = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
      await decommissionSleeve(t.p, gone.id, 'gone');
      await drainMemory(sleeve, 0.5);
      const before = await counts();
      const memory = await memoryOf(sleeve.id);

      await expect(pinNode(t.p, `cog://${'0'.repeat(64)}@1`, sleeve.id)).rejects.toMatchObject({ status: 404 });
      await expect(pinNode(t.p, 'not-a-cid', sleeve.id)).rejects.toMatchObject({ status: 404 });
      await expect(pinNode(t.p, cid, 'sleeve:0x' + '0'.repeat(40))).rejects.toMatchObject({ status: 404 });
      await expect(pinNode(t.p, cid, other.sleeve.id)).rejects.toMatchObject({ status: 403 });
      await expect(pinNode(t.p, cid, gone.id)).rejects.toMatchObject({ status: 409 });
      // Half a token: the statement declines, the transaction says why.
      await expect(pinNode(t.p, cid, sleeve.id)).rejects.toMatchObject({ status: 402 });

      expect(await counts()).toEqual(before);
      expect(await memoryOf(sleeve.id)).toBe(memory);
      expect(await pinnedOf(cid)).toBe(false);
    });

    it('twelve concurrent pins of one node charge it once', async () => {
      const { sleeve } = await sleeveOn('pin-race');
      const cid = await write(sleeve.id, 'raced');
      const before = await memoryOf(sleeve.id);
      const all = await Promise.all(Array.from({ length: 12 }, () => pinNode(t.p, cid, sleeve.id)));
      expect(all.every((x) => x.cid === cid && x.pinned)).toBe(true);
      expect(all.reduce((n, x) => n + x.cost.memory, 0)).toBe(1);
      expect(await memoryOf(sleeve.id)).toBe(before - 1);
      expect(await pinEntries(cid)).toHaveLength(2);
    });

    it('twenty concurrent pins with memory for five: five charged, fifteen 402, the balance exact', async () => {
      const { sleeve } = await sleeveOn('pin-five');
      const cids: string[] = [];
      for (let i = 0; i < 20; i++) cids.push(await write(sleeve.id, `node ${i}`));
      await drainMemory(sleeve, 5);
      const tries = await Promise.allSettled(cids.map((cid) => pinNode(t.p, cid, sleeve.id)));
      const ok = tries.filter((x): x is PromiseFulfilledResult<Awaited<ReturnType<typeof pinNode>>> => x.status === 'fulfilled');
      expect(ok).toHaveLength(5);
      for (const x of ok) expect(x.value.cost).toEqual({ memory: 1 });
      for (const x of tries) if (x.status === 'rejected') expect(x.reason).toMatchObject({ status: 402 });
      expect(await memoryOf(sleeve.id)).toBe(0);
      const pinned = await prisma().memoryNode.count({ where: { cid: { in: cids }, pinned: true } });
      expect(pinned).toBe(5);
      const entries = await prisma().ledgerEntry.findMany({ where: { reason: 'pin', ref: { in: cids } } });
      expect(entries).toHaveLength(10);
      expect(entries.reduce((n, e) => n + e.milli, 0n)).toBe(0n);
    });

    it('an API-stored node is pinned on the Hippocampus again after the commit (its peers), a node of the platform is not', async () => {
      const { sleeve } = await sleeveOn('pin-replica');
      const own = await write(sleeve.id, 'in its row');
      const put = { data: 'stored by the Hippocampus API', links: [], epoch: EPOCH, stackId: sleeve.stackId };
      const stored = computeDataCid(put);
      await putNode(prisma(), t.p.objects, { ...put, cid: stored }, EPOCH);
      expect(await nodePinState(prisma(), stored)).toEqual({ stackId: sleeve.stackId, pinned: false, inRow: false });

      const inner = t.p.ports.hippocampus!;
      const calls: Array<{ op: string; cid: string; committed?: boolean }> = [];
      let pushed!: () => void;
      const push = new Promise<void>((r) => (pushed = r));
      t.p.ports.hippocampus = {
        ...inner,
        meta: async (cid, tx) => (calls.push({ op: 'meta', cid }), inner.meta(cid, tx)),
        put: async (node, tx) => (calls.push({ op: 'put', cid: node.cid }), inner.put(node, tx)),
        pin: async (cid, tx) => {
          // Read on a connection of its own: true only once the pin's statement has committed.
          calls.push({ op: 'pin', cid, committed: (await nodePinState(prisma(), cid))?.pinned });
          await inner.pin(cid, tx);
          pushed();
        },
      } satisfies HippocampusClient;
      try {
        expect(await pinNode(t.p, own, sleeve.id)).toMatchObject({ cost: { memory: 1 } });
        expect(calls).toEqual([]);
        expect(await pinNode(t.p, stored, sleeve.id)).toMatchObject({ cost: { memory: 1 } });
        await push;
        expect(calls).toEqual([{ op: 'pin', cid: stored, committed: true }]);
      } finally {
        t.p.ports.hippocampus = inner;
      }
    });
  });
}
