// What a proof is checked against: the state of the contexts above the residues (sleeves, memory,
// stacks) and the chains. The residues context declares the port; the checks themselves live in
// flows/residue-proofs.ts, wired by the composition root (bin/assembly.ts).
import type { Platform } from '../../lib/platform.ts';
import type { ResidueKind } from './open.ts';

export type Verdict = { ok: true; facts: Record<string, unknown> } | { ok: false; reason: string };

/** What a proof is checked against: the residue as recorded. */
export interface ResidueFacts {
  kind: ResidueKind;
  evidence: Record<string, unknown>;
  stackId: string | null;
  sleeveId: string | null;
  epoch: number;
}

export interface ResidueProofs {
  /** A 404 problem unless the claimant is a stack. */
  requireClaimant(p: Platform, stackId: string): Promise<void>;
  /** The proof checked against real state (never trusted). */
  check(p: Platform, residue: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict>;
}

declare module '../../lib/platform.ts' {
  interface Ports {
    /** How residue proofs and claimants are checked (flows/residue-proofs.ts). */
    residueProofs: ResidueProofs;
  }
}

export function residueProofs(p: Platform): ResidueProofs {
  if (!p.ports.residueProofs) throw new Error('residues: no proof checker wired (the composition root sets p.ports.residueProofs, bin/assembly.ts)');
  return p.ports.residueProofs;
}
