// Thalamus fold time: one epoch of 100,000 Hippocampus writes (plus 1,000 Cortex txs and 1,000
// sleeves), from source rows in memory to crossRoot. Target: under 250 ms.
//   npx tsx bench/fold.ts
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { computeRoots } from '../subgraphs/chains/thalamus/coherence.ts';

export interface FoldBenchResult {
  writes: number;
  runs: number;
  medianMs: number;
  minMs: number;
  crossRoot: string;
}

export function runFoldBench(opts: { writes?: number; runs?: number } = {}): FoldBenchResult {
  const writes = opts.writes ?? 100_000;
  const runs = opts.runs ?? 7;
  const cids = Array.from({ length: writes }, (_, i) => `cog://${randomBytes(32).toString('hex')}@${i % 7}`);
  const evmTxHashes = Array.from({ length: 1000 }, () => '0x' + randomBytes(32).toString('hex'));
  const sleeves = Array.from({ length: 1000 }, (_, i) => ({ type: 'ai', id: `sleeve:ai:${i}:${randomBytes(4).toString('hex')}` }));
  computeRoots({ evmTxHashes, cids: cids.slice(0, 1000), sleeves }); // warm up
  const times: number[] = [];
  let crossRoot = '';
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    crossRoot = computeRoots({ evmTxHashes, cids, sleeves }).crossRoot;
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { writes, runs, medianMs: times[Math.floor(runs / 2)], minMs: times[0], crossRoot };
}

export function formatFoldBench(x: FoldBenchResult): string {
  return [
    `Thalamus fold of one epoch: ${x.writes.toLocaleString('en-US')} DAG writes + 1,000 txs + 1,000 sleeves (${x.runs} runs)`,
    `  median ${x.medianMs.toFixed(1)} ms, min ${x.minMs.toFixed(1)} ms   (target < 250 ms)`,
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(formatFoldBench(runFoldBench()));
}
