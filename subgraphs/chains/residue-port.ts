// How the chains report a coordination failure (a reorg that detached an anchor, an equivocating
// operator, a fold with a gap): as a residue. Residues sit above the chains (they mirror their
// records on Cortex through the chains' outbox), so the chains reach them through this port, which
// the composition root wires to the residues context (bin/assembly.ts).
import type { Tx } from '../../lib/db/index.ts';

export type ChainResidueKind = 'reorg-orphan' | 'routing-equivocation' | 'historical-non-canonical' | 'shard-loss';

export interface ChainResidue {
  kind: ChainResidueKind;
  trigger: string;
  stackId?: string;
  sleeveId?: string;
  epoch: number;
  evidence: Record<string, unknown>;
  dedupeKey: string;
  expiryEpochs: number;
}

export type ResidueOpener = (tx: Tx, r: ChainResidue) => Promise<{ residue: { id: string }; created: boolean }>;

let opener: ResidueOpener | undefined;

/** The composition root's wiring (once per process). */
export function wireResidueOpener(fn: ResidueOpener): void {
  opener = fn;
}

/** Opens the residue in the caller's transaction (one per cause: dedupeKey). */
export function openResidue(tx: Tx, r: ChainResidue): ReturnType<ResidueOpener> {
  if (!opener) throw new Error('chains: no residue opener wired (the composition root calls wireResidueOpener, bin/assembly.ts)');
  return opener(tx, r);
}
