// Where a fold's leaves come from. Each source is an interface so a remote (HTTP) implementation
// can replace the in-process one; a source that fails or stalls becomes a gap in the fold.
// The DAG leaves come through the Hippocampus itself (its store when it runs in this process, its
// HTTP API with failover otherwise), not from the shared index: when no Hippocampus node answers
// the fold has an `ipfs` gap, it never silently reads around a stopped Hippocampus.
import type { Platform } from '../../../lib/platform.ts';
import { hippocampusClient } from '../../memory/index.ts';
import { listAliveSleeves } from '../../sleeves/index.ts';

/** Cortex: hashes of the epoch's transactions that touch the contract suite. */
export interface EvmTxSource {
  txHashesForEpoch(epoch: number): Promise<string[]>;
}

/** Hippocampus: CIDs written in the epoch, in write order. */
export interface DagWriteSource {
  cidsForEpoch(epoch: number): Promise<string[]>;
}

/** Sleeves: the alive ones at fold time. */
export interface SleeveSource {
  activeSleeves(): Promise<{ type: string; id: string }[]>;
}

export interface FoldSources {
  evm: EvmTxSource;
  dag: DagWriteSource;
  sleeves: SleeveSource;
}

/**
 * `sourceTimeoutMs`: the fold's bound on a source. Each Hippocampus node gets its share of it, so a
 * hung primary still leaves time for the fallback before the read becomes a gap.
 */
export function platformSources(p: Platform, opts: { sourceTimeoutMs?: number } = {}): FoldSources {
  const nodes = 1 + p.config.hippocampusFallbacks.length;
  const perNode = opts.sourceTimeoutMs ? Math.max(200, Math.floor(opts.sourceTimeoutMs / nodes) - 50) : undefined;
  // Loaded in the background: the Cortex module pulls in ethers and the contract artifacts.
  const cortex = import('../cortex/tx-source.ts').then((m) => m.cortexTxSource(p));
  cortex.catch(() => {});
  return {
    evm: { txHashesForEpoch: async (epoch) => (await cortex).txHashesForEpoch(epoch) },
    // Chosen per call: in embedded mode the Hippocampus may start after the Thalamus's sources.
    dag: { cidsForEpoch: (epoch) => hippocampusClient(p, { timeoutMs: perNode }).epochWrites(epoch) },
    sleeves: { activeSleeves: async () => (await listAliveSleeves(p.db.prisma)).map((s) => ({ type: s.embodimentType, id: s.id })) },
  };
}
