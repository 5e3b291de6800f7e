// A Medulla node holds only a window of its chain in memory (here the least it may be, 256 blocks,
// so a short chain shows it): older blocks are still served over RPC from the database, a restart
// reads the window and not the whole history, and a heavier fork that branches below the window
// still reorganises the chain.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { verifySynapticProof, type SynapticProof } from '../lib/mmr.ts';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';
import { computeRoots } from '../subgraphs/chains/thalamus/coherence.ts';

let p: TestPlatform;
let x: MedullaService, y: MedullaService;
const WINDOW = 256;
const base = { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 64, pollMs: 60_000, memoryWindow: WINDOW };

beforeAll(async () => {
  p = await testPlatform();
  // No peers: blocks move between the nodes only when the test hands them over.
  x = await createMedulla(p, { ...base, node: 'win-x' });
  y = await createMedulla(p, { ...base, node: 'win-y' });
});
afterAll(async () => {
  for (const s of [x, y]) await s?.close();
  await p?.cleanup();
});

const headers = async (s: MedullaService, from: number, count: number) => medullaRpc<Block[]>(s.url, 'getheaders', [from, count]);

it('serves the whole chain while memory holds a window, across a restart and a reorg below it', async () => {
  const shared: Block[] = [];
  for (let i = 0; i < 12; i++) shared.push(await x.node.mineNow());
  for (const b of shared) expect((await y.node.chain.accept(b)).status).toBe('extended');

  const tuple = { epoch: 14, ...computeRoots({ evmTxHashes: [], cids: ['cog://window@14'], sleeves: [] }) };
  await medullaRpc(x.url, 'submitcoherenceroot', [tuple.epoch, tuple.crossRoot, tuple.evmRoot, tuple.ipfsRoot, tuple.sleevesRoot]);
  while (x.node.chain.tip().height < 400) await x.node.mineNow();

  // Memory holds the window (trimmed once a quarter over), not the 401 blocks.
  const held = x.node.chain.held();
  expect(held.from).toBeGreaterThanOrEqual(400 - WINDOW - WINDOW / 4);
  expect(held.blocks).toBeLessThanOrEqual(WINDOW + WINDOW / 4 + 1);

  // Below the window, every read comes from the database and agrees with what was stored.
  const all = await headers(x, 0, 401);
  expect(all.map((b) => b.height)).toEqual(Array.from({ length: 401 }, (_, i) => i));
  for (let i = 1; i < all.length; i++) expect(all[i].prevHash).toBe(all[i - 1].blockHash);
  expect(all.slice(1, 13).map((b) => b.blockHash)).toEqual(shared.map((b) => b.blockHash));
  expect(await medullaRpc<Block>(x.url, 'getblock', [5])).toEqual(all[5]);
  expect(await medullaRpc<Block>(x.url, 'getblockbyhash', [all[5].blockHash])).toEqual(all[5]);
  expect(await headers(x, 300, 10)).toEqual(all.slice(300, 310)); // from the window alone
  expect(await headers(x, held.from - 40, 80)).toEqual(all.slice(held.from - 40, held.from + 40)); // across its lower edge
  const carrier = all.find((b) => b.coherenceEpoch === 14)!;
  expect(carrier.height).toBeLessThan(held.from);
  expect(await medullaRpc(x.url, 'getcoherence', [14])).toMatchObject({ epoch: 14, blockHash: carrier.blockHash, crossRoot: tuple.crossRoot });
  expect(await medullaRpc(x.url, 'getcoherence', [13])).toBeNull();
  const proof = await medullaRpc<{ root: string; proof: SynapticProof; blockHash: string }>(x.url, 'getsynapticproof', [10, 20]);
  expect(proof.blockHash).toBe(all[10].blockHash);
  expect(proof.root).toBe(all[20].synapticFieldRoot);
  expect(verifySynapticProof(proof.proof, proof.root)).toBe(true);
  await expect(medullaRpc(x.url, 'getblockbyhash', ['ab'.repeat(32)])).rejects.toMatchObject({ code: -32004 });

  // A restart reads the window below the stored tip, and mining goes on from it.
  await x.close();
  x = await createMedulla(p, { ...base, node: 'win-x' });
  expect(x.node.chain.tip().blockHash).toBe(all[400].blockHash);
  expect(x.node.chain.held()).toEqual({ from: 400 - WINDOW, blocks: WINDOW + 1 });
  const next = await x.node.mineNow();
  expect(next).toMatchObject({ height: 401, prevHash: all[400].blockHash });

  // y's branch from height 12 grows until it carries more work than x's chain; x then takes it
  // block by block: a fork 389 blocks deep, below x's window.
  const branch: Block[] = [];
  while (y.node.chain.tip().work <= x.node.chain.tip().work) branch.push(await y.node.mineNow());
  const statuses: string[] = [];
  for (const b of branch) statuses.push((await x.node.chain.accept(b)).status);
  expect(statuses.filter((s) => s === 'reorg')).toHaveLength(1);
  expect(statuses.slice(0, statuses.indexOf('reorg')).every((s) => s === 'side')).toBe(true);
  expect(x.node.chain.tip().blockHash).toBe(branch[branch.length - 1].blockHash);
  const tipHeight = x.node.chain.tip().height;
  expect(x.node.chain.held().from).toBeGreaterThanOrEqual(tipHeight - WINDOW - WINDOW / 4);

  // x's main chain is now y's, block for block, and the detached anchor opened its residue.
  const count = tipHeight + 1;
  expect(await headers(x, 0, count)).toEqual(await headers(y, 0, count));
  expect(await medullaRpc(x.url, 'getcoherence', [14])).toBeNull();
  const stored = await p.db.prisma.medullaBlock.findUnique({ where: { node_hash: { node: 'win-x', hash: carrier.blockHash } } });
  expect(stored).toMatchObject({ onMain: false });
  const residues = await p.db.prisma.residue.findMany({ where: { kind: 'reorg-orphan' } });
  expect(residues.map((r) => (r.evidence as { detachedHash: string }).detachedHash)).toContain(carrier.blockHash);
  // The detached tuple is past the 256-epoch horizon of the new tip: it is not committed again.
  expect(tipHeight).toBeGreaterThan(14 + 256);
  expect(x.node.chain.pendingTuple()).toBeUndefined();
  const again = await x.node.mineNow();
  expect(again).toMatchObject({ prevHash: branch[branch.length - 1].blockHash, coherenceEpoch: null });
}, 180_000);
