// The Thalamus fold's sources over the contexts it folds: the Cortex transactions of the epoch
// (chains), the DAG writes (memory) and the alive sleeves (sleeves). The DAG leaves come through
// the Hippocampus itself (its store when it runs in this process, its HTTP API with failover
// otherwise), not from the shared index: when no Hippocampus node answers the fold has an `ipfs`
// gap, it never silently reads around a stopped Hippocampus. The sleevesRoot is kept from the sleeves
// changed since the last fold (the "leafXid" stamp, read from the xmin of the last read's snapshot),
// after one full read of the alive sleeves when the sources are made (a Thalamus start).
import type { Platform } from '../lib/platform.ts';
import { cortexTxSource, incrementalSleevesRoot, type FoldSources } from '../subgraphs/chains/index.ts';
import { hippocampusClient } from '../subgraphs/memory/index.ts';
import { sleeveLeafChanges } from '../subgraphs/sleeves/index.ts';

/**
 * `sourceTimeoutMs`: the fold's bound on a source. Each Hippocampus node gets its share of it, so a
 * hung primary still leaves time for the fallback before the read becomes a gap.
 */
export function platformSources(p: Platform, opts: { sourceTimeoutMs?: number } = {}): FoldSources {
  const nodes = 1 + p.config.hippocampusFallbacks.length;
  const perNode = opts.sourceTimeoutMs ? Math.max(200, Math.floor(opts.sourceTimeoutMs / nodes) - 50) : undefined;
  const cortex = cortexTxSource(p);
  const sleeves = incrementalSleevesRoot<bigint>({
    read: async (since) => {
      const { rows, xmin } = await sleeveLeafChanges(p.db.prisma, since);
      return { rows, cursor: xmin };
    },
  });
  // The full read of a start begins now, so the first fold (bounded by the source timeout) reads
  // only what changed since; a failed read is retried by that fold.
  void sleeves.sleevesRoot().catch(() => {});
  return {
    evm: { txHashesForEpoch: (epoch) => cortex.txHashesForEpoch(epoch) },
    // Chosen per call: in embedded mode the Hippocampus may start after the Thalamus's sources.
    dag: { cidsForEpoch: (epoch) => hippocampusClient(p, { timeoutMs: perNode }).epochWrites(epoch) },
    sleeves,
  };
}
