// The mirrored records' chain side (cortex/records.ts): a record is pending while any of its
// intents is outstanding, then takes its last intent's outcome. The outstanding intents are found
// by the record's ref, so enqueueChainTx holds every record intent to it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { stackRow } from './helpers/stack-rows.ts';
import { enqueueChainTx } from '../subgraphs/chains/outbox.ts';
import { trySettleRecords } from '../subgraphs/chains/cortex/records.ts';
import { openResidueNow } from '../subgraphs/residues/index.ts';

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
  it('of one table are written together, each with its own outcome; an anchor keeps its hash unless one comes', async () => {
    // A block settles a fold's thirty-odd residues at once: one statement writes them all.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { residue } = await openResidueNow(db(), {
        kind: 'stale-ordering',
        trigger: `test ${i}`,
        epoch: 1,
        evidence: {},
        dedupeKey: `records-batch:${i}`,
        expiryEpochs: 10,
      });
      ids.push(residue.id);
    }
    const rows = await db().chainOutbox.findMany({ where: { ref: { in: ids }, kind: 'openResidue' } });
    expect(rows).toHaveLength(6);
    // Residue 5 has a second intent outstanding: it stays pending whatever its first one did.
    await db().$transaction((tx) => enqueueChainTx(tx, { kind: 'claimResidue', ref: ids[5], payload: { residueId: ids[5], claimant: 'x' } }));
    await db().chainOutbox.updateMany({ where: { id: { in: rows.map((r) => r.id) } }, data: { status: 'confirmed' } });
    const outcomeOf = (id: string) => (ids.indexOf(id) % 2 ? 'failed' : 'confirmed') as 'confirmed' | 'failed';
    const busy = await trySettleRecords(
      db(),
      rows.map((r) => ({ kind: r.kind, payload: r.payload as Record<string, unknown>, outcome: outcomeOf(r.ref) })),
    );
    expect(busy).toEqual([]);
    const statuses = Object.fromEntries((await db().residue.findMany({ where: { id: { in: ids } } })).map((r) => [r.id, r.chainStatus]));
    expect(statuses).toEqual({
      [ids[0]]: 'confirmed',
      [ids[1]]: 'failed',
      [ids[2]]: 'confirmed',
      [ids[3]]: 'failed',
      [ids[4]]: 'confirmed',
      [ids[5]]: 'pending',
    });

    const anchor = (epoch: number, txHash: string | null) => ({
      epoch,
      crossRoot: 'c',
      evmRoot: 'e',
      ipfsRoot: 'i',
      sleevesRoot: 's',
      btcRoot: 'b',
      gaps: [],
      txHash,
    });
    await db().epochAnchor.createMany({ data: [anchor(901, '0xold'), anchor(902, '0xkept')] });
    await trySettleRecords(db(), [
      { kind: 'anchor', payload: { epoch: 901 }, outcome: 'confirmed', txHash: '0xnew' },
      { kind: 'anchor', payload: { epoch: 902 }, outcome: 'failed' },
    ]);
    const anchors = await db().epochAnchor.findMany({ where: { epoch: { in: [901, 902] } }, orderBy: { epoch: 'asc' } });
    expect(anchors.map((a) => [a.chainStatus, a.txHash])).toEqual([
      ['confirmed', '0xnew'],
      ['failed', '0xkept'],
    ]);
  });
});
