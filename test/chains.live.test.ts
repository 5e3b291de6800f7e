// Live: Medulla mining in its worker thread with the real retarget, epochs flowing over the bus
// (outbox -> relay -> followers), the Thalamus folding every epoch with Cortex stalled, and Medulla
// never waiting for it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEventRelay } from '../lib/events.ts';
import type { TestPlatform } from './helpers/platform.ts';
import { thalamusPlatform } from './helpers/thalamus.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';
import { createThalamus, type ThalamusService } from '../subgraphs/chains/thalamus/service.ts';
import { platformSources } from '../flows/thalamus-sources.ts';
import { crossRootOf } from '../subgraphs/chains/thalamus/coherence.ts';
import { Miner } from '../subgraphs/chains/medulla/miner.ts';
import { genesisBlock } from '../subgraphs/chains/medulla/chain.ts';

const T = 150;
const DUTY = 0.5;
let GENESIS = 0;
let p: TestPlatform;
let fixture: Awaited<ReturnType<typeof thalamusPlatform>> | undefined;
let m: MedullaService;
let th: ThalamusService;
let relay: ReturnType<typeof startEventRelay>;

beforeAll(async () => {
  // Start 4x too hard for this machine's hash rate (measured now, on the real miner).
  const probe = new Miner({ duty: 1, sliceMs: 20 });
  const r = await probe.measure(genesisBlock(1), 400);
  await probe.close();
  GENESIS = Math.max(1, Math.round((r.hashes / r.elapsedMs) * DUTY * T * 4));
  fixture = await thalamusPlatform(T);
  p = fixture.p;
  relay = startEventRelay(p, { pollMs: 50 });
  await p.bus.subscribe({ subjects: ['cog.epoch.advanced'] }, (d) => {
    const e = d.data.epoch as number;
    if (e > p.epochs.current()) p.setEpoch(e);
  });
  m = await createMedulla(p, { port: 0, autoMine: true, duty: DUTY, intervalMs: T, genesisDifficulty: GENESIS, node: 'live' });
  th = await createThalamus(p, {
    port: 0,
    medullaUrl: m.url,
    sources: { ...platformSources(p), evm: { txHashesForEpoch: () => new Promise<string[]>(() => {}) } }, // Cortex stopped
  });
});
afterAll(async () => {
  await m?.close();
  await th?.close();
  await relay?.close();
  await fixture?.close();
});

it('retargets from a wrong start to the block interval while the Thalamus folds with Cortex stalled', async () => {
  const until = Date.now() + 25_000;
  let height = 0;
  while (height < 40 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    height = (await medullaRpc<{ height: number }>(m.url, 'getinfo')).height;
  }
  expect(height).toBeGreaterThanOrEqual(40);
  const blocks = await medullaRpc<Block[]>(m.url, 'getheaders', [0, 500]);
  const [from, to] = [blocks[20], blocks[40]];
  const meanMs = (to.tsMs - from.tsMs) / (to.height - from.height);
  expect(meanMs).toBeGreaterThan(T * 0.4);
  expect(meanMs).toBeLessThan(T * 2.5);
  expect(to.difficulty).toBeLessThan(GENESIS);

  // Epochs reached the followers, and the Thalamus folded them without Cortex.
  expect(p.epochs.current()).toBeGreaterThanOrEqual(38);
  const anchors = await p.db.prisma.epochAnchor.findMany({ orderBy: { epoch: 'asc' } });
  expect(anchors.length).toBeGreaterThanOrEqual(3);
  expect(anchors.every((a) => a.gaps.includes('evm'))).toBe(true);
  const committed = blocks.filter((b) => b.coherenceEpoch !== null);
  expect(committed.length).toBeGreaterThanOrEqual(2);
  for (const b of committed) expect(crossRootOf(b.evmRoot, b.ipfsRoot, b.sleevesRoot)).toBe(b.crossRoot);
  expect(committed.every((b) => anchors.some((a) => a.epoch === b.coherenceEpoch && a.crossRoot === b.crossRoot))).toBe(true);
}, 40_000);
