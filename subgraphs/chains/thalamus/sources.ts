// Where a fold's leaves come from. Each source is an interface so a remote (HTTP) implementation
// can replace the in-process one; a source that fails or stalls becomes a gap in the fold.
// The DAG and sleeve leaves come from other contexts, so their implementation is composed above
// the contexts (flows/thalamus-sources.ts) and handed in by the composition root.
import type { Platform } from '../../../lib/platform.ts';

/** Cortex: hashes of the epoch's transactions that touch the contract suite. */
export interface EvmTxSource {
  txHashesForEpoch(epoch: number): Promise<string[]>;
}

/** Hippocampus: CIDs written in the epoch, in write order. */
export interface DagWriteSource {
  cidsForEpoch(epoch: number): Promise<string[]>;
}

/**
 * Sleeves: the sleevesRoot over the alive ones at fold time (coherence.ts, `sleevesRootOf`), and
 * how many there are. The source keeps the root up to date from what changed since its last call
 * (flows/thalamus-sources.ts) instead of reading every alive sleeve; `sleevesSource` turns a plain
 * list into one.
 */
export interface SleeveSource {
  sleevesRoot(): Promise<{ root: string; count: number }>;
}

export interface FoldSources {
  evm: EvmTxSource;
  dag: DagWriteSource;
  sleeves: SleeveSource;
}

declare module '../../../lib/platform.ts' {
  interface Ports {
    /** The fold's sources over the other contexts, wired by the composition root (flows/thalamus-sources.ts). */
    foldSources: (p: Platform, opts: { sourceTimeoutMs?: number }) => FoldSources;
  }
}

/** The sources assembly wired for this platform. */
export function wiredSources(p: Platform, opts: { sourceTimeoutMs?: number } = {}): FoldSources {
  if (!p.ports.foldSources) throw new Error('thalamus: no fold sources wired (the composition root sets p.ports.foldSources, bin/assembly.ts)');
  return p.ports.foldSources(p, opts);
}
