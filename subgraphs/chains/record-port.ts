// The tables of mirrored records belong to the contexts above the chains (Stack to stacks, Sleeve
// to sleeves, Residue to residues), so the outbox does not write their chainStatus itself: each
// owner hands the chains a small writer, wired once per process by the composition root
// (bin/assembly.ts), as the residue opener is. The epoch anchors are the chains' own.
import type { Db, Tx } from '../../lib/db/index.ts';

export type ChainStatus = 'pending' | 'confirmed' | 'failed';

/** What the outbox needs of a table of mirrored records (ids are the table's primary keys). */
export interface MirroredTable {
  /**
   * Of these ids, the rows this transaction locked without waiting for another writer (FOR UPDATE
   * SKIP LOCKED: a perceive holds its stack's row until it commits) and the ones that exist at all.
   */
  lockFree(tx: Tx, ids: string[]): Promise<{ locked: string[]; existing: string[] }>;
  /** Writes the chainStatus of many rows in one statement (a block settles dozens of records of a table at once). */
  setChainStatuses(tx: Tx, rows: ReadonlyArray<{ id: string; status: ChainStatus }>): Promise<void>;
}

/** A stack's head as the heads mirror sends it: the NFT's head and epoch counter. */
export interface StackHead {
  stackId: string;
  tokenId: number;
  head: string;
  epoch: number;
}

/** What the heads mirror needs of the stacks (their owner's): which heads the chain lacks, and which it holds now. */
export interface StackHeads {
  /** Stacks whose head the chain does not hold (at most `limit`, in id order, after the id `after`). */
  unmirrored(db: Db, limit: number, after?: string): Promise<StackHead[]>;
  /** The chain holds these heads now; `confirm`: the stack has no other intent outstanding. */
  mirrored(db: Db, heads: Array<{ stackId: string; head: string; confirm: boolean }>): Promise<void>;
}

export type MirroredTables = { stack: MirroredTable; sleeve: MirroredTable; residue: MirroredTable; stackHeads: StackHeads };

let tables: MirroredTables | undefined;

/** The composition root's wiring (once per process). */
export function wireMirroredTables(t: MirroredTables): void {
  tables = t;
}

function wired(): MirroredTables {
  if (!tables) throw new Error('chains: no mirrored record tables wired (the composition root calls wireMirroredTables, bin/assembly.ts)');
  return tables;
}

export function mirroredTable(name: 'stack' | 'sleeve' | 'residue'): MirroredTable {
  return wired()[name];
}

export const stackHeadsPort = (): StackHeads => wired().stackHeads;
