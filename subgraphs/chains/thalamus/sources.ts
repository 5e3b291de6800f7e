// Where a fold's leaves come from. Each source is an interface so a remote (HTTP) implementation
// can replace the in-process one; a source that fails or stalls becomes a gap in the fold.
import type { Platform } from '../../../lib/platform.ts';
import { dagWritesInEpoch } from '../../memory/hippocampus/store.ts';
import { listAliveSleeves } from '../../sleeves/sleeves.ts';

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

export function platformSources(p: Platform): FoldSources {
  // Loaded in the background: the Cortex module pulls in ethers and the contract artifacts.
  const cortex = import('../cortex/reconcile.ts').then((m) => m.cortexTxSource(p));
  cortex.catch(() => {});
  return {
    evm: { txHashesForEpoch: async (epoch) => (await cortex).txHashesForEpoch(epoch) },
    dag: { cidsForEpoch: (epoch) => dagWritesInEpoch(p.db.prisma, epoch) },
    sleeves: { activeSleeves: async () => (await listAliveSleeves(p.db.prisma)).map((s) => ({ type: s.embodimentType, id: s.id })) },
  };
}
