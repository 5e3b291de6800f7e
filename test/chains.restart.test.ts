// A Medulla node restarted in the middle of a reorg keeps the tuples of the blocks the reorg
// detached: y follows x's block carrying a tuple y was never sent, z's heavier fork detaches it on
// y, y restarts, and y's next block still commits that tuple on the new tip.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import { computeRoots } from '../subgraphs/chains/thalamus/coherence.ts';

let p: TestPlatform;
let x: MedullaService, y: MedullaService, z: MedullaService;
const base = { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 64, pollMs: 100 };

beforeAll(async () => {
  p = await testPlatform();
  // No peers: blocks move only when the test hands them over (submitblock), so the order is exact.
  x = await createMedulla(p, { ...base, node: 'node-x' });
  y = await createMedulla(p, { ...base, node: 'node-y' });
  z = await createMedulla(p, { ...base, node: 'node-z' });
});
afterAll(async () => {
  for (const s of [x, y, z]) await s?.close();
  await p?.cleanup();
});

it('a restart during a reorg does not lose the detached tuple', async () => {
  const shared = await x.node.mineNow();
  for (const s of [y, z]) expect((await s.node.chain.accept(shared)).status).toBe('extended');

  const tuple = { epoch: 2, ...computeRoots({ evmTxHashes: [], cids: ['cog://detached@2'], sleeves: [] }) };
  await medullaRpc(x.url, 'submitcoherenceroot', [tuple.epoch, tuple.crossRoot, tuple.evmRoot, tuple.ipfsRoot, tuple.sleevesRoot]);
  const anchored = await x.node.mineNow();
  expect(anchored).toMatchObject({ height: 2, coherenceEpoch: 2, crossRoot: tuple.crossRoot });
  expect((await y.node.chain.accept(anchored)).status).toBe('extended');
  expect(y.node.chain.hasTuple(2)).toBe(false); // carried by the block only: y was never sent it

  // z's heavier fork from the shared block detaches the anchored block on y.
  const fork = [];
  for (let i = 0; i < 4; i++) fork.push(await z.node.mineNow());
  const statuses: string[] = [];
  for (const b of fork) statuses.push((await y.node.chain.accept(b)).status);
  expect(statuses).toContain('reorg');
  expect(y.node.chain.tip().blockHash).toBe(fork[3].blockHash);
  expect(y.node.chain.pendingTuple()).toMatchObject({ epoch: 2, crossRoot: tuple.crossRoot });
  const row = await p.db.prisma.medullaBlock.findUnique({ where: { node_hash: { node: 'node-y', hash: anchored.blockHash } } });
  expect(row).toMatchObject({ onMain: false });
  expect(row?.detachedAt).toBeInstanceOf(Date);

  // Restart y before it mined again: the tuple is still pending and its next block commits it.
  await y.close();
  y = await createMedulla(p, { ...base, node: 'node-y' });
  expect(y.node.chain.tip().blockHash).toBe(fork[3].blockHash);
  expect(y.node.chain.pendingTuple()).toMatchObject({
    epoch: 2,
    crossRoot: tuple.crossRoot,
    evmRoot: tuple.evmRoot,
    ipfsRoot: tuple.ipfsRoot,
    sleevesRoot: tuple.sleevesRoot,
  });
  const again = await y.node.mineNow();
  expect(again).toMatchObject({ prevHash: fork[3].blockHash, coherenceEpoch: 2, crossRoot: tuple.crossRoot });
  expect(y.node.chain.pendingTuple()).toBeUndefined();

  // Once committed on the main chain it stays committed across a further restart (nothing pending).
  await y.close();
  y = await createMedulla(p, { ...base, node: 'node-y' });
  expect(y.node.chain.pendingTuple()).toBeUndefined();
  expect((await y.node.chain.committedBlock(2))?.blockHash).toBe(again.blockHash);
}, 60_000);
