// Epoch cadence: block intervals of a live Medulla node mining in the background, paced (the
// default: a block is published one interval after its parent) against unpaced (a memoryless PoW
// search, MEDULLA_PACING=off), same machine, same run, same starting difficulty (one that makes an
// unpaced background solve take one interval on average here). Reports the intervals after a
// warm-up, and the ratio of their spreads.
//   npx tsx bench/epochs.ts [blocks=30] [intervalMs=1000]
import { pathToFileURL } from 'node:url';
import { testPlatform } from '../test/helpers/platform.ts';
import { createMedulla } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import { Miner } from '../subgraphs/chains/medulla/miner.ts';
import { genesisBlock } from '../subgraphs/chains/medulla/chain.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';

const DUTY = 0.25;
const WARMUP = 12;

export interface Cadence {
  blocks: number;
  meanMs: number;
  stdevMs: number;
  p5Ms: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  minMs: number;
}
export interface EpochsBenchResult {
  intervalMs: number;
  genesisDifficulty: number;
  paced: Cadence;
  unpaced: Cadence;
  spreadRatio: number;
}

function cadence(intervals: number[]): Cadence {
  const s = [...intervals].sort((a, b) => a - b);
  const q = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))]!;
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  const stdev = Math.sqrt(s.reduce((a, b) => a + (b - mean) ** 2, 0) / s.length);
  return { blocks: s.length, meanMs: mean, stdevMs: stdev, p5Ms: q(0.05), p50Ms: q(0.5), p95Ms: q(0.95), maxMs: s.at(-1)!, minMs: s[0]! };
}

async function run(paced: boolean, blocks: number, intervalMs: number, genesisDifficulty: number): Promise<Cadence> {
  const p = await testPlatform({ COG_EPOCH_INTERVAL_MS: String(intervalMs) });
  const m = await createMedulla(p, { port: 0, autoMine: true, duty: DUTY, intervalMs, genesisDifficulty, node: paced ? 'paced' : 'unpaced', paced });
  try {
    const want = WARMUP + blocks + 1;
    const until = Date.now() + want * intervalMs * 6;
    for (;;) {
      const { height } = await medullaRpc<{ height: number }>(m.url, 'getinfo');
      if (height >= want) break;
      if (Date.now() > until) throw new Error(`only ${height} of ${want} blocks in time`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const hs = await medullaRpc<Block[]>(m.url, 'getheaders', [WARMUP + 1, blocks + 1]);
    return cadence(hs.slice(1).map((b, i) => b.tsMs - hs[i]!.tsMs));
  } finally {
    await m.close();
    await p.cleanup();
  }
}

export async function runEpochsBench(opts: { blocks?: number; intervalMs?: number } = {}): Promise<EpochsBenchResult> {
  const blocks = opts.blocks ?? 30;
  const intervalMs = opts.intervalMs ?? 1000;
  const probe = new Miner({ duty: 1, sliceMs: 20 });
  const r = await probe.measure(genesisBlock(1), 500);
  await probe.close();
  const genesisDifficulty = Math.max(1, Math.round((r.hashes / r.elapsedMs) * DUTY * intervalMs));
  const unpaced = await run(false, blocks, intervalMs, genesisDifficulty);
  const paced = await run(true, blocks, intervalMs, genesisDifficulty);
  return { intervalMs, genesisDifficulty, paced, unpaced, spreadRatio: paced.stdevMs / unpaced.stdevMs };
}

export function formatEpochsBench(x: EpochsBenchResult): string {
  const row = (name: string, c: Cadence) =>
    `  ${name.padEnd(9)} mean ${Math.round(c.meanMs)} ms, stdev ${Math.round(c.stdevMs)} ms, p5 ${c.p5Ms} / p50 ${c.p50Ms} / p95 ${c.p95Ms} ms, min ${c.minMs} max ${c.maxMs} ms (${c.blocks} blocks)`;
  return [
    `Medulla block intervals, target ${x.intervalMs} ms, background duty ${DUTY}, start difficulty ${x.genesisDifficulty}`,
    row('paced', x.paced),
    row('unpaced', x.unpaced),
    `  spread paced / unpaced  ${x.spreadRatio.toFixed(2)}`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const blocks = Number(process.argv[2] ?? 30);
  const intervalMs = Number(process.argv[3] ?? 1000);
  runEpochsBench({ blocks, intervalMs }).then(
    (x) => {
      console.log(formatEpochsBench(x));
      process.exit(0);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
