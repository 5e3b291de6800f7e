// A Medulla block that commits, for an epoch, a coherence tuple other than the Thalamus's fold of it.
// Medulla commits the first tuple submitted per epoch and submissions need not be signed, so another
// submitter can get there first (before the fold, or with a tuple still pending when the fold
// arrives). The committed root then binds none of the three chains' real state for that epoch; the
// Cortex EpochAnchor carries the fold. Whichever side sees it second (the fold finding the block, or
// the block finding the fold) opens one historical-non-canonical residue for the epoch.
import type { Tx } from '../../lib/db/index.ts';
import { openResidue } from './residue-port.ts';

export interface ForeignTuple {
  epoch: number;
  committed: { crossRoot: string; blockHash: string; height: number; node: string };
  folded: { crossRoot: string; operator: string | null };
}

export async function openForeignTuple(tx: Tx, f: ForeignTuple, atEpoch: number, expiryEpochs: number): Promise<void> {
  await openResidue(tx, {
    kind: 'historical-non-canonical',
    trigger: `Medulla block ${f.committed.height} commits crossRoot ${f.committed.crossRoot} for epoch ${f.epoch}; the Thalamus folded ${f.folded.crossRoot}`,
    epoch: atEpoch,
    evidence: { source: 'medulla', epoch: f.epoch, committed: f.committed, folded: f.folded },
    dedupeKey: `historical-non-canonical:medulla:${f.epoch}`,
    expiryEpochs,
  });
}

/** The fold side: a main-chain block (any node) that already committed another tuple for the epoch. */
export async function committedElsewhere(tx: Tx, epoch: number, crossRoot: string) {
  return tx.medullaBlock.findFirst({ where: { coherenceEpoch: epoch, onMain: true, NOT: { crossRoot } }, orderBy: { height: 'asc' } });
}
