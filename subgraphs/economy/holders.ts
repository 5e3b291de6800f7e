// What the economy reads of the contexts above it (stacks, sleeves): a stack's terms (and whether
// it exists) and which sleeves of a stack hold its tokens. The economy sits below them and imports neither: it
// declares this port, and the composition root fills it (bin/assembly.ts, flows/economy-holders.ts).
import type { Database, Db, Tx } from '../../lib/db/index.ts';
import type { ReadPart } from '../../lib/db/statement.ts';
import type { Platform } from '../../lib/platform.ts';
import type { TokenAmounts } from './ledger.ts';
import type { Cpv } from './treasury.ts';

/** A stack's terms as the stacks context holds them: its CPV and binding (the economy keeps its own lastActiveEpoch). */
export interface StackTerms extends Cpv {
  bindingFloor: number;
  bindingDecay: number;
}

export interface StackHolders {
  /** The stack's terms; a 404 problem for an unknown stack. */
  stackTerms(db: Db | Tx, stackId: string): Promise<StackTerms>;
  /** The ids of the stack's alive sleeves, in spawn order. */
  aliveSleeveIds(db: Db | Tx, stackId: string): Promise<string[]>;
  /** Token totals over each stack's alive sleeves (one statement for any number of stacks; through the driver when given the Database). */
  aliveSleeveTotals(db: Database | Db | Tx, stackIds: readonly string[]): Promise<Map<string, TokenAmounts>>;
  /** The same as one read of a read statement (lib/db/statement.ts), to batch with others; every stack asked is in the map. */
  aliveSleeveTotalsRead(stackIds: readonly string[]): ReadPart<Map<string, TokenAmounts>>;
}

declare module '../../lib/platform.ts' {
  interface Ports {
    /** The stacks and sleeves the economy's balances, drips and claims are about (flows/economy-holders.ts). */
    stackHolders: StackHolders;
  }
}

export function holders(p: Platform): StackHolders {
  if (!p.ports.stackHolders) throw new Error('economy: no stack holders wired (the composition root sets p.ports.stackHolders, bin/assembly.ts)');
  return p.ports.stackHolders;
}
