// Recall latency through POST /v1/recall over real HTTP at depth 10, 100 and 1000, against a
// baseline measured in the same run: the raw decrypt (epochKey + AES-256-GCM open) of the same nodes.
//   npx tsx bench/recall.ts
// ratio = recall p50 / raw decrypt p50: what the walk (index reads, payload reads, ledger, drift,
// HTTP) costs over decryption alone.
import { pathToFileURL } from 'node:url';
import { memoryTestApp } from '../test/helpers/memory-app.ts';
import { createStack, getStackRow, setEpisodicHead, stackMasterSecret } from '../subgraphs/stacks/stacks.ts';
import { spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { mint, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { computeCid } from '../subgraphs/memory/hippocampus/cid.ts';
import { putNode } from '../subgraphs/memory/hippocampus/store.ts';
import { epochKey, fromUtf8, open, seal, type Sealed } from '../lib/crypto.ts';
import { percentile } from './perceive.ts';

export interface RecallBenchRow {
  depth: number;
  runs: number;
  recallP50Ms: number;
  recallP99Ms: number;
  rawDecryptP50Ms: number;
  /** recallP50Ms / rawDecryptP50Ms */
  ratio: number;
}

const r2 = (x: number) => Math.round(x * 1000) / 1000;

async function timeRuns(runs: number, fn: () => Promise<void> | void): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out.sort((a, b) => a - b);
}

export async function runRecallBench(opts: { depths?: number[]; runs?: number[] } = {}): Promise<RecallBenchRow[]> {
  const depths = opts.depths ?? [10, 100, 1000];
  const runs = opts.runs ?? [30, 15, 5];
  const maxDepth = Math.max(...depths);
  const t = await memoryTestApp();
  try {
    const url = await t.app.listen({ host: '127.0.0.1', port: 0 });
    t.p.setEpoch(1);
    const created = await createStack(t.p, { name: 'recall-bench' });
    const sleeve = await spawnSleeve(t.p, { stackId: created.id, kind: 'memory', shape: 'B' });
    const need = depths.reduce((s, d, i) => s + d * (runs[i] + 1), 0);
    await t.p.db.prisma.$transaction((tx) =>
      mint(tx, sleeveAccount(sleeve.id), [{ token: 'memory', milli: BigInt(need) * 1000n }], { reason: 'bench', epoch: 1, stackId: created.id }),
    );
    // A chain of maxDepth nodes written straight to the store (perceiving them one by one would
    // only slow the setup), encrypted exactly as perceive does.
    const stack = await getStackRow(t.p.db.prisma, created.id);
    const key = epochKey(stackMasterSecret(t.p, stack), stack.id, 1);
    const sealed: Sealed[] = [];
    let head: string | null = null;
    for (let i = 0; i < maxDepth; i++) {
      const c = seal(key, `memory ${i} `.repeat(8));
      const data = JSON.stringify(c);
      const links: string[] = head ? [head] : [];
      const cid = computeCid({ data, links, epoch: 1, stackId: stack.id });
      await putNode(t.p.db.prisma, t.p.objects, { cid, data, links, epoch: 1, stackId: stack.id, kind: 'perceive' }, 1);
      sealed.push(c);
      head = cid;
    }
    await t.p.db.prisma.$transaction((tx) => setEpisodicHead(tx, stack.id, head!, { epoch: 1 }));
    const master = stackMasterSecret(t.p, stack);
    const rows: RecallBenchRow[] = [];
    for (const [i, depth] of depths.entries()) {
      const call = async () => {
        const res = await fetch(`${url}/v1/recall`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ stackId: stack.id, sleeveId: sleeve.id, depth }),
        });
        const body = (await res.json()) as { fragments: unknown[] };
        if (res.status !== 200 || body.fragments.length !== depth) throw new Error(`recall depth ${depth}: ${res.status}`);
      };
      await call(); // warm
      const rec = await timeRuns(runs[i], call);
      const nodes = sealed.slice(-depth);
      const raw = await timeRuns(Math.max(runs[i], 10), () => {
        const k = epochKey(master, stack.id, 1);
        for (const n of nodes) fromUtf8(open(k, n));
      });
      const p50 = percentile(rec, 0.5);
      const rawP50 = percentile(raw, 0.5);
      rows.push({
        depth,
        runs: runs[i],
        recallP50Ms: r2(p50),
        recallP99Ms: r2(percentile(rec, 0.99)),
        rawDecryptP50Ms: r2(rawP50),
        ratio: Math.round((p50 / rawP50) * 10) / 10,
      });
    }
    return rows;
  } finally {
    await t.close();
  }
}

export function formatRecallBench(rows: RecallBenchRow[]): string {
  return [
    'depth   recall p50   recall p99   raw decrypt p50   ratio',
    ...rows.map(
      (r) =>
        `${String(r.depth).padStart(5)} ${String(r.recallP50Ms).padStart(9)} ms ${String(r.recallP99Ms).padStart(9)} ms ${String(r.rawDecryptP50Ms).padStart(13)} ms ${String(r.ratio).padStart(8)}`,
    ),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runRecallBench();
  console.log(`recall through REST vs raw decrypt of the same nodes (PGlite in memory, Node ${process.version})`);
  console.log(formatRecallBench(rows));
}
