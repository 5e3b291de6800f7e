// A duty-cycled Medulla miner that gets too small a share of the CPU still keeps epochs coming:
// once the tip is LATE_INTERVALS intervals old the background search goes full speed. Here the
// duty (1%) would make a block take ~40 intervals; the boost brings it near LATE_INTERVALS.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';
import { LATE_INTERVALS } from '../subgraphs/chains/medulla/node.ts';
import { Miner } from '../subgraphs/chains/medulla/miner.ts';
import { genesisBlock } from '../subgraphs/chains/medulla/chain.ts';

const T = 250;
let p: TestPlatform;
let m: MedullaService;
let difficulty = 0;

beforeAll(async () => {
  // A difficulty full speed solves in ~T/2 on this machine (so ~50 T at 1% duty).
  const probe = new Miner({ duty: 1, sliceMs: 20 });
  const r = await probe.measure(genesisBlock(1), 300);
  await probe.close();
  difficulty = Math.max(1, Math.round((r.hashes / r.elapsedMs) * (T / 2)));
  p = await testPlatform({ COG_EPOCH_INTERVAL_MS: String(T) });
  m = await createMedulla(p, { port: 0, autoMine: true, duty: 0.01, intervalMs: T, genesisDifficulty: difficulty, node: 'late' });
});
afterAll(async () => {
  await m?.close();
  await p?.cleanup();
});

it('mines at full speed once the tip is late, so blocks keep coming on a starved miner', async () => {
  await expect.poll(async () => (await medullaRpc<{ height: number }>(m.url, 'getinfo')).height, { timeout: 30_000, interval: 100 }).toBeGreaterThanOrEqual(6);
  const blocks = await medullaRpc<Block[]>(m.url, 'getheaders', [1, 6]);
  // Solve times from block 2 on (block 1 follows the fixed old genesis timestamp).
  const gaps = blocks.slice(1).map((b, i) => b.tsMs - blocks[i]!.tsMs);
  const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
  // At 1% duty the mean would be ~50 T; late boosting keeps it within a few intervals.
  expect(mean).toBeLessThan((LATE_INTERVALS + 6) * T);
}, 40_000);
