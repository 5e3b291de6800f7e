// The mirrored records' chain side (cortex/records.ts): a record is pending while any of its
// intents is outstanding, then takes its last intent's outcome. The outstanding intents are found
// by the record's ref, so enqueueChainTx holds every record intent to it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { stackRow } from './helpers/stack-rows.ts';
import { enqueueChainTx } from '../subgraphs/chains/outbox.ts';
import { trySettleRecords } from '../subgraphs/chains/cortex/records.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform();
});
afterAll(async () => {
  await p?.cleanup();
});

const db = () => p.db.prisma;
const chainStatus = async (id: string) => (await db().stack.findUniqueOrThrow({ where: { id } })).chainStatus;
const rowOf = (ref: string, kind: string) => db().chainOutbox.findFirstOrThrow({ where: { ref, kind } });

describe('mirrored records', () => {
  it('stay pending while another intent of theirs is outstanding, then take the last outcome', async () => {
    const [a, b] = [stackRow(0), stackRow(1)];
    await db().stack.createMany({ data: [a, b] });
    const mint = (s: { id: string }, tokenId: number) =>
      db().$transaction((tx) => enqueueChainTx(tx, { kind: 'mintIdentity', ref: s.id, payload: { stackId: s.id, tokenId, cpv: [1, 1, 1, 1, 1] } }));
    const update = (s: { id: string }) =>
      db().$transaction((tx) => enqueueChainTx(tx, { kind: 'updateStack', ref: s.id, payload: { stackId: s.id, tokenId: 1, epoch: 2 } }));
    await mint(a, 1);
    await update(a);
    await mint(b, 2);
    expect(await chainStatus(a.id)).toBe('pending');

    // a's mint is mined, its update is not: a stays pending. b's only intent is mined, and a's
    // outstanding update (the same kinds, another ref) does not hold b back.
    const aMint = await rowOf(a.id, 'mintIdentity');
    const bMint = await rowOf(b.id, 'mintIdentity');
    await db().chainOutbox.updateMany({ where: { id: { in: [aMint.id, bMint.id] } }, data: { status: 'confirmed' } });
    const settled = (row: typeof aMint, outcome: 'confirmed' | 'failed') => ({ kind: row.kind, payload: row.payload as Record<string, unknown>, outcome });
    expect(await trySettleRecords(db(), [settled(aMint, 'confirmed'), settled(bMint, 'confirmed')])).toEqual([]);
    expect(await chainStatus(a.id)).toBe('pending');
    expect(await chainStatus(b.id)).toBe('confirmed');

    // a's update reverts: nothing of a is outstanding any more, and its record takes that outcome.
    const aUpdate = await rowOf(a.id, 'updateStack');
    await db().chainOutbox.update({ where: { id: aUpdate.id }, data: { status: 'failed' } });
    await trySettleRecords(db(), [settled(aUpdate, 'failed')]);
    expect(await chainStatus(a.id)).toBe('failed');
  });

  it("refuse an intent whose ref is not its record's, and write nothing", async () => {
    const s = stackRow(2);
    await db().stack.create({ data: s });
    const before = await db().chainOutbox.count();
    await expect(
      db().$transaction((tx) => enqueueChainTx(tx, { kind: 'mintIdentity', ref: 'stack:other', payload: { stackId: s.id, tokenId: 3, cpv: [1, 1, 1, 1, 1] } })),
    ).rejects.toThrow(`ref must be ${s.id}`);
    await expect(db().$transaction((tx) => enqueueChainTx(tx, { kind: 'anchor', ref: 'epoch:7', payload: { epoch: 7 } }))).rejects.toThrow(
      'ref must be anchor:7',
    );
    expect(await db().chainOutbox.count()).toBe(before);
    // A ledger row mirrors no record: its ref is free, and it is a ledger intent, not an outbox row.
    await db().$transaction((tx) => enqueueChainTx(tx, { kind: 'burn', ref: 'ledger:any', payload: { stackId: s.id, amounts: [] } }));
    expect(await db().chainOutbox.count()).toBe(before);
    expect(await db().chainLedgerIntent.count({ where: { ref: 'ledger:any', status: 'pending' } })).toBe(1);
  });
});
