// Three Medulla nodes on loopback sharing one database (separate node ids): partition them, mine
// on both sides, heal, and check every node converges on the heaviest tip; the reorg that detaches
// a block carrying an EpochAnchor opens a reorg-orphan residue and the tuple is committed again.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import { computeRoots } from '../subgraphs/chains/thalamus/coherence.ts';

let p: TestPlatform;
let a: MedullaService, b: MedullaService, c: MedullaService;

const tipOf = async (s: MedullaService) => (await medullaRpc<{ tip: string; height: number }>(s.url, 'getinfo')).tip;

async function converged(nodes: MedullaService[], timeoutMs = 10_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const tips = await Promise.all(nodes.map(tipOf));
    if (tips.every((t) => t === tips[0])) return tips[0];
    if (Date.now() > until) throw new Error(`no convergence: ${tips.join(' ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  p = await testPlatform();
  const base = { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 64, pollMs: 100 };
  a = await createMedulla(p, { ...base, node: 'node-a' });
  b = await createMedulla(p, { ...base, node: 'node-b' });
  c = await createMedulla(p, { ...base, node: 'node-c' });
  a.node.setPeers([b.url, c.url]);
  b.node.setPeers([a.url, c.url]);
  c.node.setPeers([a.url, b.url]);
});
afterAll(async () => {
  for (const s of [a, b, c]) await s?.close();
  await p?.cleanup();
});

it('partitioned nodes converge on the heaviest fork after healing; the orphaned anchor becomes a residue', async () => {
  await a.node.mineNow();
  await a.node.mineNow();
  const shared = await converged([a, b, c]);

  // Partition: {a} | {b, c}.
  a.node.setPeers([]);
  b.node.setPeers([c.url]);
  c.node.setPeers([b.url]);
  const height = (await medullaRpc<{ height: number }>(a.url, 'getinfo')).height;
  const tuple = { epoch: height, ...computeRoots({ evmTxHashes: [], cids: ['cog://orphan@2'], sleeves: [] }) };
  await medullaRpc(a.url, 'submitcoherenceroot', [tuple.epoch, tuple.crossRoot, tuple.evmRoot, tuple.ipfsRoot, tuple.sleevesRoot]);
  const anchored = await a.node.mineNow();
  expect(anchored.coherenceEpoch).toBe(tuple.epoch);
  await a.node.mineNow();
  for (let i = 0; i < 4; i++) await b.node.mineNow();
  const heavy = await converged([b, c]);
  expect(await tipOf(a)).not.toBe(heavy);
  expect(heavy).not.toBe(shared);

  // Heal.
  a.node.setPeers([b.url, c.url]);
  b.node.setPeers([a.url, c.url]);
  c.node.setPeers([a.url, b.url]);
  expect(await converged([a, b, c])).toBe(heavy);
  expect((await medullaRpc<{ height: number }>(a.url, 'getinfo')).height).toBe(height + 4);

  const residues = await p.db.prisma.residue.findMany({ where: { kind: 'reorg-orphan' } });
  expect(residues).toHaveLength(1);
  expect(residues[0]).toMatchObject({ bountyMilli: 12_000, status: 'open' });
  expect(residues[0].evidence).toMatchObject({ node: 'node-a', detachedHash: anchored.blockHash, coherenceEpoch: tuple.epoch });
  const onMain = await p.db.prisma.medullaBlock.findUnique({ where: { node_hash: { node: 'node-a', hash: anchored.blockHash } } });
  expect(onMain?.onMain).toBe(false);

  // The detached tuple is re-submitted: a's next block on the new tip commits it, and everyone follows.
  const again = await a.node.mineNow();
  expect(again).toMatchObject({ coherenceEpoch: tuple.epoch, crossRoot: tuple.crossRoot, prevHash: heavy });
  expect(await converged([a, b, c])).toBe(again.blockHash);
  for (const s of [a, b, c]) expect(await medullaRpc(s.url, 'getcoherence', [tuple.epoch])).toMatchObject({ blockHash: again.blockHash });

  // A peer announcing a block that breaks the rules is refused with the reason.
  const bad = { ...again, blockHash: 'ab'.repeat(32), prevHash: again.blockHash, height: again.height + 1, epoch: again.height + 1 };
  await expect(medullaRpc(b.url, 'submitblock', [bad])).rejects.toMatchObject({ code: -32010, data: { reason: 'bad-hash' } });
}, 60_000);

it('announces each block once, whichever nodes attach it', async () => {
  const db = p.db.prisma;
  const block = await a.node.mineNow();
  await converged([a, b, c]);
  // No relay runs here: every event recorded is still in the outbox.
  const rows = await db.eventOutbox.findMany({ where: { subject: { in: ['cog.epoch.advanced', 'cog.block.mined'] }, msgId: { contains: block.blockHash } } });
  expect(rows.map((r) => r.subject).sort()).toEqual(['cog.block.mined', 'cog.epoch.advanced']);
  expect(rows.find((r) => r.subject === 'cog.epoch.advanced')!.msgId).toBe(`epoch:${block.height}:${block.blockHash}`);
});
