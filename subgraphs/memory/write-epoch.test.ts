// Out of Medulla's process a write is stamped with the newest epoch the database knows, not a bus
// view that has not heard of the newest block yet: its statement checks that no later block is on a
// main chain (chains epochCurrentPart), and a batch behind is stamped again. Medulla itself is never
// asked on the way, so a Medulla that does not answer holds no write up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from '../../test/helpers/memory-app.ts';
import { followEpochs, type EpochInfo } from '../../lib/epoch.ts';
import { createStack } from '../stacks/stacks.ts';
import { spawnSleeve } from '../sleeves/sleeves.ts';
import { perceive } from '../../flows/memory.ts';

const hex = (n: number, c = '0') => n.toString(16).padStart(64, c);
const at = (n: number): EpochInfo => ({ epoch: n, height: n, tip: hex(n) });

for (const engine of ['pglite', 'postgres'] as const) {
  describe(`the epoch a write is stamped with, on ${engine}`, () => {
    let t: MemoryTestApp;
    let medulla: () => Promise<EpochInfo>;
    beforeAll(async () => {
      t = await memoryTestAppOn(engine);
      medulla = async () => at(3);
      t.p.epochs = await followEpochs(t.p.bus, () => medulla()); // no bus event is ever published here
    });
    afterAll(async () => {
      await t?.p.epochs.close();
      await t?.close();
    });

    /** A block stored as Medulla stores one (the bus not told). */
    const block = (epoch: number, onMain: boolean, node = 'n1') =>
      t.p.db.prisma.medullaBlock.create({
        data: {
          node,
          hash: hex(epoch, onMain ? 'a' : 'b'),
          height: epoch,
          prevHash: hex(epoch - 1, 'a'),
          epoch,
          difficulty: 1,
          ts: 0,
          tsMs: 0n,
          nonce: '0',
          crossRoot: hex(0),
          evmRoot: hex(0),
          ipfsRoot: hex(0),
          sleevesRoot: hex(0),
          synapticFieldRoot: hex(0),
          work: '1',
          onMain,
        },
      });

    it("is the follower's epoch until the database holds a later block; then that block's, with nothing left by the attempt behind", async () => {
      expect(t.p.epochs.authoritative).toBe(false);
      const stack = await createStack(t.p, { name: 'w' });
      const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
      expect((await perceive(t.p, { sleeveId: sleeve.id, text: 'at three' })).epoch).toBe(3);

      await block(9, true); // mined through another process; the bus has not said so here
      medulla = () => new Promise<EpochInfo>(() => {}); // and Medulla hung: never asked on the way
      const t0 = Date.now();
      const r = await perceive(t.p, { sleeveId: sleeve.id, text: 'at nine' });
      expect(Date.now() - t0).toBeLessThan(1500);
      expect(r).toMatchObject({ epoch: 9 });
      expect(r.cid.endsWith('@9')).toBe(true);
      expect(t.p.epochs.info()).toEqual({ epoch: 9, height: 9, tip: hex(9, 'a') });

      // A block off the main chain (a reorg detached it) is no later epoch.
      await block(12, false);
      expect((await perceive(t.p, { sleeveId: sleeve.id, text: 'still nine' })).epoch).toBe(9);

      // Several writes of a batch behind: each stamped again once, each its own node, all linked.
      await block(10, true, 'n2');
      const many = await Promise.all(Array.from({ length: 6 }, (_, i) => perceive(t.p, { sleeveId: sleeve.id, text: `ten ${i}` })));
      expect(many.map((w) => w.epoch)).toEqual([10, 10, 10, 10, 10, 10]);
      const nodes = await t.p.db.prisma.memoryNode.findMany({ where: { stackId: stack.id }, orderBy: { writeSeq: 'asc' } });
      expect(nodes.map((n) => n.epoch)).toEqual([3, 9, 9, 10, 10, 10, 10, 10, 10]);
      const entries = await t.p.db.prisma.ledgerEntry.count({ where: { reason: 'perceive', ref: sleeve.id } });
      expect(entries).toBe(2 * nodes.length);
    });
  });
}
