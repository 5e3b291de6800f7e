// Paced mining: a background block claims the time one interval after its parent and is published
// at that time, so epochs come every interval (not at the exponentially distributed times of a
// memoryless PoW search), while a manual block (POST /v1/mining/block) still comes at once.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';

const T = 600;
let p: TestPlatform;
let m: MedullaService;

beforeAll(async () => {
  p = await testPlatform({ COG_EPOCH_INTERVAL_MS: String(T) });
  // Difficulty 1: every search solves at once, so only the pacing spaces the blocks.
  m = await createMedulla(p, { port: 0, autoMine: true, duty: 0.5, intervalMs: T, genesisDifficulty: 1, node: 'paced' });
});
afterAll(async () => {
  await m?.close();
  await p?.cleanup();
});

it('publishes each background block at its time, one interval after its parent; a manual block comes at once', async () => {
  const seen = new Map<number, number>(); // height -> when getinfo first showed it
  const start = (await medullaRpc<{ height: number }>(m.url, 'getinfo')).height;
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    const { height } = await medullaRpc<{ height: number }>(m.url, 'getinfo');
    if (!seen.has(height)) seen.set(height, Date.now());
    if (height >= start + 6) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const blocks = await medullaRpc<Block[]>(m.url, 'getheaders', [start + 1, 6]);
  expect(blocks.length).toBe(6);
  for (const b of blocks.slice(1)) {
    const parent = blocks.find((x) => x.height === b.height - 1)!;
    // Never sooner than one interval after its parent...
    expect(b.tsMs - parent.tsMs, `block ${b.height}`).toBeGreaterThanOrEqual(T);
    // ...and not visible before the time it claims (polling finds it at most a poll late).
    const at = seen.get(b.height);
    if (at !== undefined) expect(at, `block ${b.height} seen before its time`).toBeGreaterThanOrEqual(b.tsMs - 5);
  }
  // Without pacing, difficulty 1 would give these blocks within a few milliseconds.
  expect(blocks.at(-1)!.tsMs - blocks[0]!.tsMs).toBeGreaterThanOrEqual(5 * T);

  // A manual block does not wait for the pace: asked for right after a block, it claims an earlier
  // time than the paced one would (one interval after its parent).
  const last = blocks.at(-1)!.height;
  const b = await m.node.mineNow();
  const parent = (await medullaRpc<Block[]>(m.url, 'getheaders', [b.height - 1, 1]))[0]!;
  expect(b.height).toBeGreaterThan(last);
  expect(b.tsMs - parent.tsMs).toBeLessThan(T);
});
