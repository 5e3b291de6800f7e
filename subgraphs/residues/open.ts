// Opening a residue: a coordination failure becomes a record carrying a ResidueToken bounty.
// Detection (residue-collector, recall, Medulla reorgs, Thalamus) calls openResidue inside its own
// transaction; a cause opens at most one residue (dedupeKey), so detectors can run repeatedly.
import { randomHex } from '../../lib/crypto.ts';
import type { Db, Tx } from '../../lib/db/index.ts';
import { recordEvent } from '../../lib/events.ts';
import { enqueueChainTx } from '../chains/index.ts';

/** Bounties in RT (spec: Residue). routing-equivocation has no bounty in the spec; see docs/decisions.md. */
export const RESIDUE_BOUNTY = {
  'stale-ordering': 2,
  'speculative-divergence': 5,
  'historical-non-canonical': 8,
  'reorg-orphan': 12,
  'shard-loss': 15,
  'routing-equivocation': 10,
} as const;
export type ResidueKind = keyof typeof RESIDUE_BOUNTY;
export const RESIDUE_KINDS = Object.keys(RESIDUE_BOUNTY) as ResidueKind[];

export interface ResidueRecord {
  id: string;
  kind: string;
  trigger: string;
  bounty: number;
  status: string;
  stackId?: string;
  sleeveId?: string;
  epoch: number;
  openedAt: string;
  expiresAtEpoch: number;
  claimant?: string;
}

export function residueView(r: {
  id: string;
  kind: string;
  trigger: string;
  bountyMilli: number;
  status: string;
  stackId: string | null;
  sleeveId: string | null;
  epoch: number;
  openedAt: Date;
  expiresAtEpoch: number;
  claimant: string | null;
}): ResidueRecord {
  const v: ResidueRecord = {
    id: r.id,
    kind: r.kind,
    trigger: r.trigger,
    bounty: r.bountyMilli / 1000,
    status: r.status,
    epoch: r.epoch,
    openedAt: r.openedAt.toISOString(),
    expiresAtEpoch: r.expiresAtEpoch,
  };
  if (r.stackId) v.stackId = r.stackId;
  if (r.sleeveId) v.sleeveId = r.sleeveId;
  if (r.claimant) v.claimant = r.claimant;
  return v;
}

export interface OpenResidue {
  kind: ResidueKind;
  /** Human-readable cause, e.g. "recall fidelity 0.4 below 0.6". */
  trigger: string;
  stackId?: string;
  sleeveId?: string;
  epoch: number;
  /** Kind-specific signals, used to check proofs. Never secrets. */
  evidence: Record<string, unknown>;
  /** One residue per cause. */
  dedupeKey: string;
  expiryEpochs: number;
}

/** Opens (detected -> open) unless a residue for the same cause exists; returns it either way. */
export async function openResidue(tx: Tx, r: OpenResidue): Promise<{ residue: ResidueRecord; created: boolean }> {
  const existing = await tx.residue.findUnique({ where: { dedupeKey: r.dedupeKey } });
  if (existing) return { residue: residueView(existing), created: false };
  const id = `residue:${r.kind}:${randomHex(6)}`;
  const row = await tx.residue.create({
    data: {
      id,
      kind: r.kind,
      trigger: r.trigger,
      bountyMilli: RESIDUE_BOUNTY[r.kind] * 1000,
      status: 'open',
      stackId: r.stackId,
      sleeveId: r.sleeveId,
      epoch: r.epoch,
      expiresAtEpoch: r.epoch + r.expiryEpochs,
      evidence: r.evidence as never,
      dedupeKey: r.dedupeKey,
    },
  });
  const residue = residueView(row);
  await enqueueChainTx(tx, {
    kind: 'openResidue',
    ref: id,
    payload: { residueId: id, kind: r.kind, bountyMilli: RESIDUE_BOUNTY[r.kind] * 1000 },
    epoch: r.epoch,
  });
  await recordEvent(tx, { subject: 'cog.residue.opened', type: 'residue.opened', data: { residue }, msgId: `residue-opened:${id}` });
  return { residue, created: true };
}

/** Convenience for callers outside a transaction. */
export function openResidueNow(db: Db, r: OpenResidue) {
  return db.$transaction((tx) => openResidue(tx, r));
}
