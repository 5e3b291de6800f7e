// What the sleeves (the needlecast saga, a memory sleeve's upkeep) need of the memory context,
// which sits above them: a DAG node's metadata and pin, the pin price, a reassembly from a head,
// and the pinned-shard check. The sleeves declare this port and import no memory module; the
// composition root fills it (bin/assembly.ts, flows/sleeve-memory.ts).
import type { Tx } from '../../lib/db/index.ts';
import type { Platform } from '../../lib/platform.ts';

export interface DagNodeMeta {
  cid: string;
  epoch: number;
  links: string[];
  pinned: boolean;
}

export interface SleeveMemory {
  /** Memory tokens (milli) that pinning one node costs. */
  pinCostMilli: bigint;
  /** A node's metadata on the Hippocampus (null when unknown), in the caller's transaction when given. */
  meta(p: Platform, cid: string, tx?: Tx): Promise<DagNodeMeta | null>;
  /** Pins a node on the Hippocampus. */
  pin(p: Platform, cid: string, tx?: Tx): Promise<void>;
  /** The CIDs a reader of the stack reassembles from `head`, down to `depth` levels (DHF reconstruct). */
  reassemble(p: Platform, stackId: string, head: string | null, depth: number): Promise<string[]>;
  /** A memory sleeve's upkeep: the stack's pinned shards checked (a lost one opens a residue). */
  checkPinnedShards(p: Platform, stackId: string, sleeveId: string): Promise<void>;
}

declare module '../../lib/platform.ts' {
  interface Ports {
    /** The memory context as the sleeves use it (flows/sleeve-memory.ts). */
    sleeveMemory: SleeveMemory;
  }
}

export function sleeveMemory(p: Platform): SleeveMemory {
  if (!p.ports.sleeveMemory) throw new Error('sleeves: no memory wired (the composition root sets p.ports.sleeveMemory, bin/assembly.ts)');
  return p.ports.sleeveMemory;
}
