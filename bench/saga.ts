// Needlecast sagas per second and p99 saga latency at 8 concurrent sagas.
//   npx tsx bench/saga.ts [sagas=32] [concurrency=8]
// Each saga moves a stack with 8 memories from an ai sleeve to a freshly spawned human sleeve
// (all six steps, in-process Hippocampus, in-memory PGlite).
import { pathToFileURL } from 'node:url';
import { testPlatform } from '../test/helpers/platform.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { perceive } from '../flows/memory.ts';
import { localHippocampus } from '../subgraphs/memory/hippocampus/client.ts';
import { runNeedlecast } from '../subgraphs/sleeves/needlecast/saga.ts';

export interface SagaBenchResult {
  sagas: number;
  concurrency: number;
  completed: number;
  sagasPerSec: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;

export async function runSagaBench(opts: { sagas?: number; concurrency?: number; memories?: number } = {}): Promise<SagaBenchResult> {
  const sagas = opts.sagas ?? 32;
  const concurrency = opts.concurrency ?? 8;
  const p = await testPlatform();
  p.ports.hippocampus = localHippocampus(p);
  try {
    const sources: string[] = [];
    for (let i = 0; i < sagas; i++) {
      const stack = await createStack(p, { name: `bench ${i}` });
      const s = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
      for (let m = 0; m < (opts.memories ?? 8); m++) await perceive(p, { sleeveId: s.id, text: `memory ${m}` });
      sources.push(s.id);
    }
    const latencies: number[] = [];
    let completed = 0;
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < sources.length) {
          const from = sources[next++]!;
          const s = performance.now();
          const v = await runNeedlecast(p, { from, to: 'human' });
          latencies.push(performance.now() - s);
          if (v.status === 'completed') completed++;
        }
      }),
    );
    const total = performance.now() - t0;
    latencies.sort((a, b) => a - b);
    return {
      sagas,
      concurrency,
      completed,
      sagasPerSec: (sagas / total) * 1000,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      maxMs: latencies.at(-1) ?? 0,
    };
  } finally {
    await p.cleanup();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await runSagaBench({ sagas: Number(process.argv[2] ?? 32), concurrency: Number(process.argv[3] ?? 8) });
  console.log(
    `needlecast: ${r.completed}/${r.sagas} completed at ${r.concurrency} concurrent: ${r.sagasPerSec.toFixed(1)} sagas/s, p50 ${r.p50Ms.toFixed(0)} ms, p99 ${r.p99Ms.toFixed(0)} ms, max ${r.maxMs.toFixed(0)} ms`,
  );
}
