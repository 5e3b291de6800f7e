// The recall flow's statements (flows/recall.ts): the read is recorded by one conditional update,
// so a sleeve frozen or decommissioned between the payer's read and the recall's transaction
// neither pays nor drifts; and the stack-level payer is the richest sleeve with its balance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestApp, type MemoryTestApp } from './helpers/memory-app.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { decommissionSleeve, freezeSleeve, recordSleeveRead, richestMemoryPayer, spawnSleeve, spendFromSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { balanceOf, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { perceive } from '../flows/memory.ts';
import { recall } from '../flows/recall.ts';

let t: MemoryTestApp;
beforeAll(async () => {
  t = await memoryTestApp();
  t.p.setEpoch(1);
});
afterAll(async () => t?.close());

const sleeveRow = (id: string) => t.p.db.prisma.sleeve.findUniqueOrThrow({ where: { id } });

describe('recall flow', () => {
  it('pays from the richest sleeve, moves its drift and seen head; a recall by a frozen or dead sleeve pays nothing', async () => {
    const stack = await createStack(t.p, { name: 'recall-flow' });
    const poor = await spawnSleeve(t.p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' }); // 250 memory
    const rich = await spawnSleeve(t.p, { stackId: stack.id, kind: 'memory', shape: 'B' }); // 1000 memory
    const { cid } = await perceive(t.p, { sleeveId: rich.id, text: 'one' });
    await perceive(t.p, { sleeveId: rich.id, text: 'two' });
    expect((await richestMemoryPayer(t.p.db.prisma, stack.id))?.sleeve.id).toBe(rich.id);
    expect((await richestMemoryPayer(t.p.db.prisma, stack.id))?.memory).toBe(1000);

    const before = await sleeveRow(rich.id);
    const r = await recall(t.p, { stackId: stack.id, depth: 5 });
    expect(r).toMatchObject({ sleeveId: rich.id, effectiveDepth: 5, levels: 2, cost: { memory: 2 }, fidelity: 1 });
    expect(r.fragments.map((f) => f.text)).toEqual(['two', 'one']);
    expect((await balanceOf(t.p.db.prisma, sleeveAccount(rich.id))).memory).toBe(998);
    const after = await sleeveRow(rich.id);
    expect(after.driftMilli - before.driftMilli).toBe(100);
    expect(after.seenHead).toBe(r.head);
    expect(r.fragments.at(-1)?.node.cid).toBe(cid);

    // Frozen between the payer's read and the transaction: 409, the spend rolled back, no drift.
    await t.p.db.prisma.$transaction((tx) => freezeSleeve(tx, poor.id));
    const frozen = await sleeveRow(poor.id);
    await expect(
      t.p.db.prisma.$transaction(async (tx) => {
        await spendFromSleeve(tx, frozen, [{ token: 'memory', milli: 2000n }], { reason: 'recall', ref: poor.id, epoch: 1 });
        await recordSleeveRead(tx, poor.id, r.head, 100);
      }),
    ).rejects.toMatchObject({ status: 409, code: 'SLEEVE_FROZEN' });
    expect((await balanceOf(t.p.db.prisma, sleeveAccount(poor.id))).memory).toBe(250);
    expect((await sleeveRow(poor.id)).driftMilli).toBe(frozen.driftMilli);

    // Decommissioned (its tokens went to the pool): the recall of that sleeve is a 409, nothing paid.
    await decommissionSleeve(t.p, rich.id, 'test');
    await expect(recall(t.p, { stackId: stack.id, sleeveId: rich.id, depth: 2 })).rejects.toMatchObject({ status: 409 });
    await expect(t.p.db.prisma.$transaction((tx) => recordSleeveRead(tx, rich.id, null, 100))).rejects.toMatchObject({ status: 409 });
  });
});
