// Thalamus with a Cortex source that stalls and comes back: the gapped epochs are re-folded once
// Cortex answers, a re-fold that differs from the committed tuple opens historical-non-canonical
// (the committed tuple stays final), and a restart catches up on the epochs it missed (bounded).
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestPlatform } from './helpers/platform.ts';
import { mth, sha, thalamusPlatform, waitFor } from './helpers/thalamus.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { createThalamus, type ThalamusService } from '../subgraphs/chains/thalamus/service.ts';
import { platformSources } from '../flows/thalamus-sources.ts';
import type { FoldSources } from '../subgraphs/chains/thalamus/sources.ts';
import { checkProof } from '../flows/residue-proofs.ts';

let p: TestPlatform;
let fixture: Awaited<ReturnType<typeof thalamusPlatform>> | undefined;
let m: MedullaService;
let th: ThalamusService | undefined;

/** Cortex as the test wants it: down (throws), or answering from `txs`. */
const cortex = { up: false, calls: 0, txs: new Map<number, string[]>() };
let sources: FoldSources;

beforeAll(async () => {
  fixture = await thalamusPlatform(200);
  p = fixture.p;
  m = await createMedulla(p, { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 1, node: 'g1' });
  sources = {
    ...platformSources(p),
    evm: {
      txHashesForEpoch: async (epoch) => {
        cortex.calls++;
        if (!cortex.up) throw new Error('cortex unreachable');
        return cortex.txs.get(epoch) ?? [];
      },
    },
  };
});
afterAll(async () => {
  await th?.close();
  await m?.close();
  await fixture?.close();
});

/** Folds here wait on a stalling Cortex source: a longer poll than the helper's default. */
const FOLD_WAIT_MS = 8000;

it('re-folds the epochs Cortex missed once it answers; a differing re-fold is a historical-non-canonical residue', async () => {
  const db = p.db.prisma;
  th = await createThalamus(p, { port: 0, medullaUrl: m.url, sources });
  for (const e of [2, 3]) {
    p.setEpoch(e); // epochs 1 and 2 end while Cortex is down
    await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: e - 1 } }), FOLD_WAIT_MS);
  }
  const gapped1 = (await db.epochAnchor.findUnique({ where: { epoch: 1 } }))!;
  const gapped2 = (await db.epochAnchor.findUnique({ where: { epoch: 2 } }))!;
  expect(gapped1.gaps).toEqual(['evm']);
  expect(gapped2.gaps).toEqual(['evm']);
  expect(gapped1.evmRoot).toBe(sha().toString('hex')); // folded as an empty list
  expect(await db.residue.count()).toBe(0); // a Cortex gap alone opens nothing yet

  // Cortex is back. In truth epoch 1 had two suite transactions, epoch 2 none.
  const tx1 = '0x' + 'ab'.repeat(32),
    tx2 = '0x' + '0C'.repeat(32);
  cortex.txs.set(1, [tx1, tx2, tx1]);
  cortex.up = true;
  p.setEpoch(4); // epoch 3 folds complete, then 1 and 2 are re-folded
  const re1 = await waitFor(async () => (await db.epochAnchor.findUnique({ where: { epoch: 1 } }))?.evmRefold as Record<string, unknown> | null, FOLD_WAIT_MS);
  const re2 = await waitFor(async () => (await db.epochAnchor.findUnique({ where: { epoch: 2 } }))?.evmRefold as Record<string, unknown> | null, FOLD_WAIT_MS);
  expect((await db.epochAnchor.findUnique({ where: { epoch: 3 } }))?.gaps).toEqual([]);

  // Recomputed independently: epoch 1's canonical evmRoot and crossRoot.
  const evm = mth([tx2, tx1].map((h) => Buffer.from(h.slice(2), 'hex')));
  const cross = sha(Buffer.from('cog-coh-v1'), evm, Buffer.alloc(32), Buffer.from(gapped1.ipfsRoot, 'hex'), Buffer.from(gapped1.sleevesRoot, 'hex'));
  expect(re1).toMatchObject({ epoch: 1, evmRoot: evm.toString('hex'), crossRoot: cross.toString('hex'), txs: 2 });
  expect(re2).toMatchObject({ epoch: 2, evmRoot: gapped2.evmRoot, crossRoot: gapped2.crossRoot, txs: 0, residueId: null });

  const residues = await db.residue.findMany({ where: { kind: 'historical-non-canonical' } });
  expect(residues).toHaveLength(1);
  expect(residues[0]).toMatchObject({ id: re1.residueId, epoch: 1, bountyMilli: 8_000, status: 'open', dedupeKey: 'historical-non-canonical:thalamus-evm:1' });
  expect(residues[0].evidence).toMatchObject({
    source: 'cortex',
    epoch: 1,
    committed: { crossRoot: gapped1.crossRoot, evmRoot: gapped1.evmRoot },
    canonical: { crossRoot: cross.toString('hex'), evmRoot: evm.toString('hex'), txHashes: [tx2.slice(2).toLowerCase(), tx1.slice(2)] },
  });
  // The committed tuple is final: same roots, no second tuple, no equivocation.
  expect(await db.epochAnchor.findUnique({ where: { epoch: 1 } })).toMatchObject({ crossRoot: gapped1.crossRoot, evmRoot: gapped1.evmRoot, gaps: ['evm'] });
  expect(await db.coherenceSubmission.count({ where: { epoch: 1 } })).toBe(1);
  expect(await db.residue.count({ where: { kind: 'routing-equivocation' } })).toBe(0);
  expect(await db.eventOutbox.count({ where: { subject: 'cog.thalamus.refolded' } })).toBe(2);

  // The proof that claims it: exactly Cortex's confirmed suite transactions of the epoch.
  await db.chainOutbox.createMany({
    data: [
      { kind: 'mint', ref: 'g1', payload: {}, status: 'confirmed', txHash: tx1.slice(2), epoch: 1, nonce: 1 },
      { kind: 'mint', ref: 'g2', payload: {}, status: 'confirmed', txHash: tx2.slice(2).toLowerCase(), epoch: 1, nonce: 2 },
    ],
  });
  const facts = {
    kind: 'historical-non-canonical' as const,
    evidence: residues[0].evidence as Record<string, unknown>,
    stackId: null,
    sleeveId: null,
    epoch: 1,
  };
  expect(await checkProof(p, facts, { txHashes: [tx1, tx2] })).toMatchObject({ ok: true, facts: { epoch: 1, txs: 2 } });
  expect(await checkProof(p, facts, { txHashes: [tx1] })).toMatchObject({ ok: false });
  expect(await checkProof(p, facts, { txHashes: [tx1, tx2, '0x' + '11'.repeat(32)] })).toMatchObject({ ok: false });
  expect(await checkProof(p, facts, {})).toMatchObject({ ok: false });

  // Re-folded once: later folds do not ask Cortex about epochs 1 and 2 again.
  const calls = cortex.calls;
  p.setEpoch(5);
  await waitFor(() => db.epochAnchor.findUnique({ where: { epoch: 4 } }), FOLD_WAIT_MS);
  await th.tick();
  expect(cortex.calls - calls).toBe(1); // epoch 4's own fold only
  expect(await db.residue.count({ where: { kind: 'historical-non-canonical' } })).toBe(1);
}, 60_000);

it('after a restart folds every epoch it missed, oldest first, within the lookback', async () => {
  const db = p.db.prisma;
  await th!.close();
  th = undefined;
  p.setEpoch(12); // epochs 5..11 end while the Thalamus is down
  th = await createThalamus(p, { port: 0, medullaUrl: m.url, sources, lookbackEpochs: 4 });
  await waitFor(async () => (await db.epochAnchor.count({ where: { epoch: { gte: 8, lte: 11 } } })) === 4, FOLD_WAIT_MS);
  const rows = await db.epochAnchor.findMany({ where: { epoch: { gte: 5 } }, orderBy: { epoch: 'asc' } });
  expect(rows.map((r) => r.epoch)).toEqual([8, 9, 10, 11]); // the last 4 ended epochs; 5..7 are past the bound
  expect(rows.every((r) => r.gaps.length === 0)).toBe(true);
  expect(rows.map((r) => r.createdAt.getTime())).toEqual(rows.map((r) => r.createdAt.getTime()).sort((a, b) => a - b));
  // And every caught-up tuple reaches Medulla.
  await waitFor(async () => (await db.epochAnchor.count({ where: { epoch: { gte: 8, lte: 11 }, submitted: true } })) === 4, FOLD_WAIT_MS);
  expect(await db.coherenceSubmission.count({ where: { epoch: { gte: 8, lte: 11 } } })).toBe(4);
}, 60_000);
