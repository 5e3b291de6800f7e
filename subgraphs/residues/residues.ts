// The residue lifecycle after detection: list, read, proofs (open -> claimed -> resolved, the first
// valid proof wins the full bounty) and expiry (open -> expired).
import { sql, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { lockFreeRows } from '../../lib/db/lock-free.ts';
import type { ReadPart } from '../../lib/db/statement.ts';
import { Problem, conflict, notFound } from '../../lib/errors.ts';
import { recordEvent } from '../../lib/events.ts';
import type { Platform } from '../../lib/platform.ts';
import { enqueueChainTx, proofHashOf, type MirroredTable } from '../chains/index.ts';
import { poolAccount, SYSTEM, transfer } from '../economy/index.ts';
import { residueView, type ResidueKind, type ResidueRecord } from './open.ts';
import { residueProofs } from './proof-port.ts';

export const RESIDUE_LIST_LIMIT = 50;

export const invalidProof = (detail: string) => new Problem(422, 'INVALID_PROOF', 'Invalid proof', detail);

export async function listResidues(
  p: Platform,
  limit = RESIDUE_LIST_LIMIT,
  filter: { status?: string; kind?: string; stackId?: string } = {},
): Promise<ResidueRecord[]> {
  const where: Record<string, string> = {};
  if (filter.status) where.status = filter.status;
  if (filter.kind) where.kind = filter.kind;
  if (filter.stackId) where.stackId = filter.stackId;
  const rows = await p.db.prisma.residue.findMany({ where, orderBy: [{ openedAt: 'desc' }, { id: 'desc' }], take: Math.min(Math.max(1, limit), 500) });
  return rows.map(residueView);
}

export async function getResidueRow(db: Db | Tx, id: string) {
  const row = await db.residue.findUnique({ where: { id } });
  if (!row) throw notFound('Residue', id);
  return row;
}

export async function getResidue(p: Platform, id: string): Promise<ResidueRecord> {
  return residueView(await getResidueRow(p.db.prisma, id));
}

export interface ProofSubmission {
  /** Stack id of the claimant; the bounty goes to its pool. */
  claimant: string;
  proof: Record<string, unknown>;
}

/**
 * Checks the proof against real state, then claims with a conditional UPDATE (status = 'open'),
 * so of any number of concurrent valid proofs exactly one wins. The winner's bounty is minted in
 * ResidueToken to the claimant's pool and registered on ResidueRegistry; the residue resolves in
 * the same transaction (the payout is the resolution).
 */
export async function submitProof(p: Platform, residueId: string, sub: ProofSubmission): Promise<ResidueRecord> {
  const row = await getResidueRow(p.db.prisma, residueId);
  if (row.status !== 'open') throw conflict(`Residue ${residueId} is ${row.status}, not open`, 'RESIDUE_NOT_OPEN');
  await residueProofs(p).requireClaimant(p, sub.claimant);
  const verdict = await residueProofs(p).check(
    p,
    {
      kind: row.kind as ResidueKind,
      evidence: (row.evidence ?? {}) as Record<string, unknown>,
      stackId: row.stackId,
      sleeveId: row.sleeveId,
      epoch: row.epoch,
    },
    sub.proof,
  );
  if (!verdict.ok) throw invalidProof(verdict.reason);
  const epoch = p.epochs.current();
  return p.db.prisma.$transaction(async (tx) => {
    const won = await tx.residue.updateMany({
      where: { id: residueId, status: 'open' },
      data: { status: 'claimed', claimant: sub.claimant, proof: { ...sub.proof, checked: verdict.facts } as never },
    });
    if (won.count === 0) {
      const now = await getResidueRow(tx, residueId);
      throw conflict(`Residue ${residueId} is ${now.status}, not open`, 'RESIDUE_NOT_OPEN');
    }
    const claimed = residueView(await getResidueRow(tx, residueId));
    await recordEvent(tx, {
      subject: 'cog.residue.changed',
      type: 'residue.changed',
      data: { residue: claimed, from: 'open' },
      msgId: `residue-claimed:${residueId}`,
    });
    // A ledger transfer, not ledger.mint: the claimResidue intent below mints the RT on Cortex
    // (ResidueRegistry), and a mint mirror would mint it twice.
    await transfer(tx, SYSTEM.bounty, poolAccount(sub.claimant), [{ token: 'residue', milli: BigInt(row.bountyMilli) }], {
      reason: 'bounty',
      ref: residueId,
      epoch,
    });
    const proofHash = proofHashOf(sub.proof);
    await enqueueChainTx(tx, {
      kind: 'claimResidue',
      ref: residueId,
      epoch,
      payload: { residueId, claimant: sub.claimant, bountyMilli: row.bountyMilli, proofHash },
    });
    // The verdict on the ERC-8004 ValidationRegistry: anyone can check on Cortex that the proof
    // behind this claim was accepted (request as the claimant's operator, response 100 as validator).
    const residueUrl = `${p.config.urls.base.replace(/\/+$/, '')}/v1/coordination/residues/${encodeURIComponent(residueId)}`;
    await enqueueChainTx(tx, {
      kind: 'validationRequest',
      ref: residueId,
      epoch,
      payload: { residueId, claimant: sub.claimant, proofHash, requestURI: residueUrl },
    });
    await enqueueChainTx(tx, { kind: 'validationResponse', ref: residueId, epoch, payload: { residueId, proofHash, response: 100, responseURI: residueUrl } });
    const resolved = await tx.residue.update({ where: { id: residueId }, data: { status: 'resolved', resolvedAt: new Date() } });
    const view = residueView(resolved);
    await recordEvent(tx, {
      subject: 'cog.residue.changed',
      type: 'residue.changed',
      data: { residue: view, from: 'claimed' },
      msgId: `residue-resolved:${residueId}`,
    });
    return view;
  });
}

/** open -> expired for every residue whose expiresAtEpoch has been reached. */
/** Residues one expiry transaction takes at a time. */
export const EXPIRY_BATCH = 500;

/**
 * Expires at most `take` open residues due at `epoch`, found on the partial index
 * "Residue_open_expiresAtEpoch_idx" (status = 'open', by expiresAtEpoch) and updated by primary key
 * (an array, so the plan is index probes, not a join over every open residue); the outer status
 * check holds against a proof that won the row meanwhile.
 */
export function expireBatchQuery(epoch: number, take: number): Sql {
  return sql`UPDATE "Residue" SET status = 'expired' WHERE id = ANY(ARRAY(
      SELECT id FROM "Residue" WHERE status = 'open' AND "expiresAtEpoch" <= ${epoch} ORDER BY "expiresAtEpoch" LIMIT ${take}))
    AND status = 'open' RETURNING id`;
}

/** Whether any open residue is due at `epoch` (one probe of the same partial index), as one read of a composed statement. */
export function residuesDueRead(epoch: number): ReadPart<boolean> {
  return {
    expr: sql`SELECT EXISTS (SELECT 1 FROM "Residue" WHERE status = 'open' AND "expiresAtEpoch" <= ${epoch})`,
    parse: (v) => v === true || v === 't',
  };
}

/** Expires every open residue due at `epoch`, in transactions of EXPIRY_BATCH: O(expiring). */
export async function expireResidues(p: Platform, epoch: number): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const ids = await p.db.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<{ id: string }[]>(expireBatchQuery(epoch, EXPIRY_BATCH));
      for (const { id } of rows) {
        const view = residueView(await getResidueRow(tx, id));
        await recordEvent(tx, {
          subject: 'cog.residue.changed',
          type: 'residue.changed',
          data: { residue: view, from: 'open' },
          msgId: `residue-expired:${id}`,
        });
      }
      return rows.map((r) => r.id);
    });
    out.push(...ids);
    if (ids.length < EXPIRY_BATCH) return out;
  }
}

/** The chain outbox's writer of the residues' chainStatus (wired by bin/assembly.ts). */
export const residueChainRecords: MirroredTable = {
  lockFree: (tx, ids) => lockFreeRows(tx, '"Residue"', ids),
  setChainStatuses: async (tx, rows) => {
    if (!rows.length) return;
    await tx.$executeRaw`UPDATE "Residue" r SET "chainStatus" = v.status
      FROM unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.status)}::text[]) AS v(id, status) WHERE r.id = v.id`;
  },
};
