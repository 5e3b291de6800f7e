// Thalamus folds over real rows (recomputed here independently), submits to Medulla, and keeps
// folding with gaps when a source fails or stalls.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { verify } from '../lib/crypto.ts';
import type { TestPlatform } from './helpers/platform.ts';
import { mth, sha, thalamusPlatform, waitFor } from './helpers/thalamus.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { createThalamus, type ThalamusService } from '../subgraphs/chains/thalamus/service.ts';
import { foldEpoch, type FoldContext } from '../subgraphs/chains/thalamus/fold.ts';
import { loadOperator } from '../subgraphs/chains/thalamus/operator.ts';
import { wiredSources } from '../subgraphs/chains/thalamus/sources.ts';
import { platformSources } from '../flows/thalamus-sources.ts';
import { crossRootOf, tupleMessage } from '../subgraphs/chains/thalamus/coherence.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { submitProof } from '../subgraphs/residues/residues.ts';

let p: TestPlatform;
let fixture: Awaited<ReturnType<typeof thalamusPlatform>> | undefined;
let m: MedullaService;
let th: ThalamusService;

beforeAll(async () => {
  fixture = await thalamusPlatform(200);
  p = fixture.p;
  m = await createMedulla(p, { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 1, node: 't1' });
  for (let i = 0; i < 4; i++) await m.node.mineNow(); // Medulla at height 4, as p.setEpoch(4) below
  th = await createThalamus(p, { port: 0, medullaUrl: m.url });
});
afterAll(async () => {
  await th?.close();
  await m?.close();
  await fixture?.close();
});

it('folds the ended epoch from Cortex, Hippocampus and sleeve rows, signs it, and Medulla commits it', async () => {
  const db = p.db.prisma;
  const tx1 = 'ab'.repeat(32),
    tx2 = '0c'.repeat(32);
  await db.chainOutbox.createMany({
    data: [
      { kind: 'mint', ref: 'r1', payload: {}, status: 'confirmed', txHash: tx1, epoch: 3, nonce: 1 },
      { kind: 'mint', ref: 'r2', payload: {}, status: 'confirmed', txHash: tx2, epoch: 3, nonce: 2 },
      { kind: 'mint', ref: 'r3', payload: {}, status: 'pending', epoch: 3 },
      { kind: 'mint', ref: 'r4', payload: {}, status: 'confirmed', txHash: 'ee'.repeat(32), epoch: 2, nonce: 0 },
    ],
  });
  const cids = ['cog://' + '2'.repeat(64) + '@3', 'cog://' + '1'.repeat(64) + '@3'];
  for (const cid of cids) await db.memoryNode.create({ data: { cid, stackId: 's', epoch: 3, links: [], size: 1 } });
  await db.memoryNode.create({ data: { cid: 'cog://' + '9'.repeat(64) + '@4', stackId: 's', epoch: 4, links: [], size: 1 } });
  await db.sleeve.createMany({
    data: [
      { id: 'sleeve:memory:2:bbbbbbbb', stackId: 's', embodimentType: 'memory', shape: 'A', tickRate: 4000 },
      { id: 'sleeve:ai:1:aaaaaaaa', stackId: 's', embodimentType: 'ai', shape: 'A', tickRate: 2000 },
      { id: 'sleeve:human:3:cccccccc', stackId: 's', embodimentType: 'human', shape: 'A', tickRate: 8000, alive: false },
    ],
  });

  p.setEpoch(4); // epoch 3 ended
  const row = await waitFor(() => db.epochAnchor.findFirst({ where: { epoch: 3, submitted: true } }));
  const evm = mth([tx2, tx1].map((h) => Buffer.from(h, 'hex')));
  const ipfs = mth(cids.map((c) => sha(Buffer.from(c))));
  const sl = mth([sha(Buffer.from('aisleeve:ai:1:aaaaaaaa')), sha(Buffer.from('memorysleeve:memory:2:bbbbbbbb'))]);
  const cross = sha(Buffer.from('cog-coh-v1'), evm, Buffer.alloc(32), ipfs, sl);
  expect(row).toMatchObject({
    evmRoot: evm.toString('hex'),
    ipfsRoot: ipfs.toString('hex'),
    sleevesRoot: sl.toString('hex'),
    crossRoot: cross.toString('hex'),
    btcRoot: '0'.repeat(64),
    gaps: [],
  });
  expect(verify(row.signature!, tupleMessage({ ...row, epoch: 3 }), row.operator!)).toBe(true);
  expect(fs.statSync(path.join(p.config.dataDir, 'thalamus.key')).mode & 0o777).toBe(0o600);
  expect(await db.chainOutbox.findFirst({ where: { kind: 'anchor', ref: 'anchor:3' } })).toMatchObject({ epoch: 3 });
  const folded = await db.eventOutbox.findFirst({ where: { subject: 'cog.thalamus.folded' } });
  expect(folded?.data).toMatchObject({ epoch: 3, crossRoot: row.crossRoot, gaps: [] });

  const block = await m.node.mineNow();
  expect(block).toMatchObject({ coherenceEpoch: 3, crossRoot: row.crossRoot });
  expect(await db.epochAnchor.findUnique({ where: { epoch: 3 } })).toMatchObject({ blockHash: block.blockHash, blockHeight: block.height });

  // The tick re-serves the stored fold (one operator never sends two tuples for an epoch).
  const tick = (await (await fetch(`${th.url}/v1/epoch/tick`, { method: 'POST' })).json()) as { gaps: string[] };
  expect(tick).toMatchObject({ epoch: 3, crossRoot: row.crossRoot, submitted: true, gaps: [] });
  expect(await (await fetch(`${th.url}/v1/epoch`)).json()).toMatchObject({ epoch: 4, height: 4 });
  expect(await db.residue.count({ where: { kind: 'routing-equivocation' } })).toBe(0);
});

it('folds with what it has when Hippocampus fails and Cortex stalls: gaps, a shard-loss residue, no waiting', async () => {
  await th.close(); // the stalled instance folds alone from here
  th = await createThalamus(p, {
    port: 0,
    medullaUrl: m.url,
    sources: {
      ...platformSources(p),
      evm: { txHashesForEpoch: () => new Promise<string[]>(() => {}) },
      dag: {
        cidsForEpoch: async () => {
          throw new Error('hippocampus unreachable');
        },
      },
    },
  });
  const t0 = Date.now();
  p.setEpoch(6);
  const row = await waitFor(() => p.db.prisma.epochAnchor.findUnique({ where: { epoch: 5 } }));
  // Epoch 4, which ended unfolded, is folded first; each fold waits at most its 1 s source timeout.
  expect(Date.now() - t0).toBeLessThan(6000);
  expect((await p.db.prisma.epochAnchor.findUnique({ where: { epoch: 4 } }))?.gaps.sort()).toEqual(['evm', 'ipfs']);
  expect(row.gaps.sort()).toEqual(['evm', 'ipfs']);
  expect(row.sleevesRoot).not.toBe(row.ipfsRoot); // the sleeves source still answered
  expect(await p.db.prisma.residue.findUnique({ where: { dedupeKey: 'shard-loss:thalamus:5' } })).toMatchObject({
    kind: 'shard-loss',
    bountyMilli: 15_000,
    status: 'open',
  });
  const tick = (await (await fetch(`${th.url}/v1/epoch/tick`, { method: 'POST' })).json()) as { gaps: string[] };
  expect(tick).toMatchObject({ epoch: 5, crossRoot: row.crossRoot });
  expect(tick.gaps.sort()).toEqual(['evm', 'ipfs']);
  // Medulla never waited: it mines and commits the gapped tuples, epoch 4's first.
  expect(await m.node.mineNow()).toMatchObject({ coherenceEpoch: 4 });
  const b = await m.node.mineNow();
  expect(b).toMatchObject({ coherenceEpoch: 5, crossRoot: row.crossRoot });

  // The residue is claimable once the Hippocampus serves the epoch's writes again, each stored: a
  // write whose payload is missing refuses the proof, and with it gone the proof wins the bounty.
  const residue = (await p.db.prisma.residue.findUnique({ where: { dedupeKey: 'shard-loss:thalamus:5' } }))!;
  const finder = await createStack(p, { name: 'finder' });
  const lost = `cog://${'5e'.repeat(32)}@5`;
  await p.db.prisma.memoryNode.create({ data: { cid: lost, stackId: finder.id, epoch: 5, links: [], size: 1 } });
  await expect(submitProof(p, residue.id, { claimant: finder.id, proof: {} })).rejects.toMatchObject({ code: 'INVALID_PROOF' });
  await p.db.prisma.memoryNode.delete({ where: { cid: lost } });
  const resolved = await submitProof(p, residue.id, { claimant: finder.id, proof: {} });
  expect(resolved).toMatchObject({ status: 'resolved', claimant: finder.id });
  expect(await p.db.prisma.residue.findUnique({ where: { id: residue.id } })).toMatchObject({ proof: { checked: { epoch: 5 } } });
});

it('two folds of one epoch at once store one anchor, one intent and one event, and return the same fold', async () => {
  const db = p.db.prisma;
  const epoch = 40;
  const ctx: FoldContext = {
    p,
    sources: wiredSources(p, { sourceTimeoutMs: 5000 }),
    operator: loadOperator(p.config.dataDir, p.config.thalamusOperatorKey),
    medullaUrl: m.url,
    sourceTimeoutMs: 5000,
  };
  const [a, b, c] = await Promise.all([foldEpoch(ctx, epoch), foldEpoch(ctx, epoch), foldEpoch(ctx, epoch)]);
  expect(b!.crossRoot).toBe(a!.crossRoot);
  expect(c!.crossRoot).toBe(a!.crossRoot);
  expect(await db.epochAnchor.count({ where: { epoch } })).toBe(1);
  expect(await db.epochAnchor.findUnique({ where: { epoch } })).toMatchObject({ intentQueued: true, chainStatus: 'pending', crossRoot: a!.crossRoot });
  expect(await db.chainOutbox.findMany({ where: { ref: `anchor:${epoch}` } })).toMatchObject([
    { kind: 'anchor', epoch, payload: { epoch, crossRoot: a!.crossRoot } },
  ]);
  expect(await db.eventOutbox.count({ where: { msgId: `thalamus-folded:${epoch}` } })).toBe(1);
});

it('refuses a tick before any epoch ended', async () => {
  p.setEpoch(0);
  const res = await fetch(`${th.url}/v1/epoch/tick`, { method: 'POST' });
  expect(res.status).toBe(409);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
});

it('a tuple other than the fold committed for an epoch opens one historical-non-canonical residue, whichever comes first', async () => {
  const db = p.db.prisma;
  const h = (c: string) => c.repeat(64);
  const foreign = (epoch: number) => ({ epoch, evmRoot: h('d'), ipfsRoot: h('d'), sleevesRoot: h('d'), crossRoot: crossRootOf(h('d'), h('d'), h('d')) });
  const mineUntilCommitted = async (epoch: number) => {
    for (let i = 0; i < 8; i++) {
      const b = await m.node.mineNow();
      if (b.coherenceEpoch === epoch) return b;
    }
    throw new Error(`no block committed epoch ${epoch}`);
  };

  // Foreign first: an unsigned tuple for the current epoch is committed before the Thalamus folds it.
  const e1 = (await m.node.mineNow()).height;
  expect(await m.node.submitCoherence(foreign(e1))).toMatchObject({ accepted: true, operator: 'anonymous' });
  const b1 = await mineUntilCommitted(e1);
  expect(b1.crossRoot).toBe(foreign(e1).crossRoot);
  p.setEpoch(e1 + 1);
  const fold = await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e1 } }));
  expect(fold.crossRoot).not.toBe(b1.crossRoot);
  const r1 = await waitFor(() => db.residue.findUnique({ where: { dedupeKey: `historical-non-canonical:medulla:${e1}` } }));
  expect(r1).toMatchObject({ kind: 'historical-non-canonical', status: 'open', bountyMilli: 8000 });
  expect(r1.evidence).toMatchObject({
    source: 'medulla',
    epoch: e1,
    committed: { crossRoot: b1.crossRoot, blockHash: b1.blockHash, height: b1.height },
    folded: { crossRoot: fold.crossRoot },
  });
  // The block that committed the foreign tuple is no proof; a block committing the fold would be.
  const finder = await createStack(p, { name: 'watcher' });
  (p.config.urls as { medulla: string }).medulla = m.url; // the proof check reads blocks over Medulla's RPC
  await expect(submitProof(p, r1.id, { claimant: finder.id, proof: { height: b1.height } })).rejects.toMatchObject({
    code: 'INVALID_PROOF',
    detail: expect.stringContaining('does not commit the Thalamus fold'),
  });
  await expect(submitProof(p, r1.id, { claimant: finder.id, proof: {} })).rejects.toMatchObject({ code: 'INVALID_PROOF' });

  // Fold first: the epoch's fold is stored, then a different tuple still gets committed for it.
  const e2 = (await m.node.mineNow()).height;
  await db.epochAnchor.create({
    data: { epoch: e2, crossRoot: h('e'), evmRoot: h('e'), ipfsRoot: h('e'), sleevesRoot: h('e'), btcRoot: h('0'), gaps: [], operator: 'op' },
  });
  await m.node.submitCoherence(foreign(e2));
  const b2 = await mineUntilCommitted(e2);
  const r2 = await waitFor(() => db.residue.findUnique({ where: { dedupeKey: `historical-non-canonical:medulla:${e2}` } }));
  expect(r2.evidence).toMatchObject({
    source: 'medulla',
    epoch: e2,
    committed: { crossRoot: b2.crossRoot, height: b2.height },
    folded: { crossRoot: h('e'), operator: 'op' },
  });
  // One residue per epoch, and none where the committed tuple is the fold.
  expect(await db.residue.count({ where: { dedupeKey: { startsWith: 'historical-non-canonical:medulla:' } } })).toBe(2);
});

it('folds an ended epoch after a grace period, so a write that lands just after the advance is in its ipfsRoot', async () => {
  await th.close();
  // A grace long enough that a loaded machine does not outlast it between the advance and the late
  // write below (100 ms and one insert apart).
  const graceMs = 3000;
  th = await createThalamus(p, { port: 0, medullaUrl: m.url, foldGraceMs: graceMs });
  const db = p.db.prisma;
  const e = (await m.node.mineNow()).height + 5;
  p.setEpoch(e);
  const early = `cog://${'a1'.repeat(32)}@${e}`;
  await db.memoryNode.create({ data: { cid: early, stackId: 's', epoch: e, links: [], size: 1 } });
  p.setEpoch(e + 1); // epoch e ended; a write stamped e is still committing
  const advancedAt = Date.now();
  await new Promise((r) => setTimeout(r, 100));
  const late = `cog://${'b2'.repeat(32)}@${e}`;
  await db.memoryNode.create({ data: { cid: late, stackId: 's', epoch: e, links: [], size: 1 } });
  expect(await db.epochAnchor.findUnique({ where: { epoch: e } }), `${Date.now() - advancedAt} ms after the advance`).toBeNull(); // still within the grace
  const row = await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e } }), graceMs + 10_000);
  expect(row.ipfsRoot).toBe(mth([early, late].sort().map((c) => sha(Buffer.from(c)))).toString('hex'));
  // The next test folds with a short grace again.
  await th.close();
  th = await createThalamus(p, { port: 0, medullaUrl: m.url, foldGraceMs: 400 });
}, 30_000);

it("writes that commit after their epoch was folded open one historical-non-canonical residue at the next fold; the epoch's writes are its proof", async () => {
  const db = p.db.prisma;
  const root = (cids: string[]) => mth(cids.map((c) => sha(Buffer.from(c)))).toString('hex');
  const e = (await m.node.mineNow()).height + 20;
  p.setEpoch(e);
  const first = `cog://${'c3'.repeat(32)}@${e}`;
  await db.memoryNode.create({ data: { cid: first, stackId: 's', epoch: e, links: [], size: 1 } });
  p.setEpoch(e + 1);
  const fold = await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e } }));
  expect(fold.ipfsRoot).toBe(root([first]));
  // A write stamped e commits only now, after the fold (and its grace) took epoch e's writes.
  const late = `cog://${'d4'.repeat(32)}@${e}`;
  await db.memoryNode.create({ data: { cid: late, stackId: 's', epoch: e, links: [], size: 1 } });
  p.setEpoch(e + 2); // the fold of e + 1 reads epoch e's writes again
  const key = `historical-non-canonical:thalamus-ipfs:${e}`;
  const r = await waitFor(() => db.residue.findUnique({ where: { dedupeKey: key } }));
  expect(r).toMatchObject({ kind: 'historical-non-canonical', status: 'open', bountyMilli: 8000, epoch: e });
  expect(r.evidence).toMatchObject({
    source: 'hippocampus',
    epoch: e,
    committed: { ipfsRoot: fold.ipfsRoot, crossRoot: fold.crossRoot },
    canonical: { ipfsRoot: root([first, late]), writes: 2, crossRoot: crossRootOf(fold.evmRoot, root([first, late]), fold.sleevesRoot) },
  });
  // The committed tuple stays final.
  expect((await db.epochAnchor.findUnique({ where: { epoch: e } }))!.ipfsRoot).toBe(fold.ipfsRoot);

  // The proof is the epoch's writes in write order: the folded ones alone, another order or nothing are refused.
  const finder = await createStack(p, { name: 'late-writes' });
  for (const proof of [{ cids: [first] }, { cids: [late, first] }, {}, { cids: 'x' }]) {
    await expect(submitProof(p, r.id, { claimant: finder.id, proof })).rejects.toMatchObject({ code: 'INVALID_PROOF' });
  }
  expect(await submitProof(p, r.id, { claimant: finder.id, proof: { cids: [first, late] } })).toMatchObject({ status: 'resolved', bounty: 8 });

  // Later folds read epoch e again and open nothing more; an epoch whose writes still fold to its root opens none.
  p.setEpoch(e + 3);
  await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e + 2 } }));
  expect(await db.residue.count({ where: { dedupeKey: { startsWith: 'historical-non-canonical:thalamus-ipfs:' } } })).toBe(1);
});

it('folds every ended epoch when two advances come within one grace (no epoch skipped)', async () => {
  const db = p.db.prisma;
  const e = (await m.node.mineNow()).height + 40;
  p.setEpoch(e);
  await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e - 1 } }), 15_000);
  p.setEpoch(e + 1); // epoch e ended...
  p.setEpoch(e + 2); // ...and e + 1 right after it
  await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e + 1 } }), 15_000);
  expect(await db.epochAnchor.findUnique({ where: { epoch: e } })).not.toBeNull();
});
