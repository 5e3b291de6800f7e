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
import { platformSources } from '../subgraphs/chains/thalamus/sources.ts';
import { tupleMessage } from '../subgraphs/chains/thalamus/coherence.ts';
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
  const tx1 = 'ab'.repeat(32), tx2 = '0c'.repeat(32);
  await db.chainOutbox.createMany({ data: [
    { kind: 'mint', ref: 'r1', payload: {}, status: 'confirmed', txHash: tx1, epoch: 3, nonce: 1 },
    { kind: 'mint', ref: 'r2', payload: {}, status: 'confirmed', txHash: tx2, epoch: 3, nonce: 2 },
    { kind: 'mint', ref: 'r3', payload: {}, status: 'pending', epoch: 3 },
    { kind: 'mint', ref: 'r4', payload: {}, status: 'confirmed', txHash: 'ee'.repeat(32), epoch: 2, nonce: 0 },
  ] });
  const cids = ['cog://' + '2'.repeat(64) + '@3', 'cog://' + '1'.repeat(64) + '@3'];
  for (const cid of cids) await db.memoryNode.create({ data: { cid, stackId: 's', epoch: 3, links: [], size: 1 } });
  await db.memoryNode.create({ data: { cid: 'cog://' + '9'.repeat(64) + '@4', stackId: 's', epoch: 4, links: [], size: 1 } });
  await db.sleeve.createMany({ data: [
    { id: 'sleeve:memory:2:bbbbbbbb', stackId: 's', embodimentType: 'memory', shape: 'A', tickRate: 4000 },
    { id: 'sleeve:ai:1:aaaaaaaa', stackId: 's', embodimentType: 'ai', shape: 'A', tickRate: 2000 },
    { id: 'sleeve:human:3:cccccccc', stackId: 's', embodimentType: 'human', shape: 'A', tickRate: 8000, alive: false },
  ] });

  p.setEpoch(4); // epoch 3 ended
  const row = await waitFor(() => db.epochAnchor.findFirst({ where: { epoch: 3, submitted: true } }));
  const evm = mth([tx2, tx1].map((h) => Buffer.from(h, 'hex')));
  const ipfs = mth(cids.map((c) => sha(Buffer.from(c))));
  const sl = mth([sha(Buffer.from('aisleeve:ai:1:aaaaaaaa')), sha(Buffer.from('memorysleeve:memory:2:bbbbbbbb'))]);
  const cross = sha(Buffer.from('cog-coh-v1'), evm, Buffer.alloc(32), ipfs, sl);
  expect(row).toMatchObject({ evmRoot: evm.toString('hex'), ipfsRoot: ipfs.toString('hex'), sleevesRoot: sl.toString('hex'), crossRoot: cross.toString('hex'), btcRoot: '0'.repeat(64), gaps: [] });
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
    port: 0, medullaUrl: m.url,
    sources: {
      ...platformSources(p),
      evm: { txHashesForEpoch: () => new Promise<string[]>(() => {}) },
      dag: { cidsForEpoch: async () => { throw new Error('hippocampus unreachable'); } },
    },
  });
  const t0 = Date.now();
  p.setEpoch(6);
  const row = await waitFor(() => p.db.prisma.epochAnchor.findUnique({ where: { epoch: 5 } }));
  expect(Date.now() - t0).toBeLessThan(4000);
  expect(row.gaps.sort()).toEqual(['evm', 'ipfs']);
  expect(row.sleevesRoot).not.toBe(row.ipfsRoot); // the sleeves source still answered
  expect(await p.db.prisma.residue.findUnique({ where: { dedupeKey: 'shard-loss:thalamus:5' } })).toMatchObject({ kind: 'shard-loss', bountyMilli: 15_000, status: 'open' });
  const tick = (await (await fetch(`${th.url}/v1/epoch/tick`, { method: 'POST' })).json()) as { gaps: string[] };
  expect(tick).toMatchObject({ epoch: 5, crossRoot: row.crossRoot });
  expect(tick.gaps.sort()).toEqual(['evm', 'ipfs']);
  // Medulla never waited: it mines and commits the gapped tuple.
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

it('refuses a tick before any epoch ended', async () => {
  p.setEpoch(0);
  const res = await fetch(`${th.url}/v1/epoch/tick`, { method: 'POST' });
  expect(res.status).toBe(409);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
});
