// The epoch-anchor pass's chains side: each folded epoch (an EpochAnchor row, written by the
// Thalamus) becomes one 'anchor' intent in the Cortex outbox, once. The fold writes the intent with
// the row and marks it (intentQueued); the pass finds the rows without one on their partial index.
import { sql, type Sql } from '../../lib/db/index.ts';
import type { Platform } from '../../lib/platform.ts';
import { enqueueChainTx } from './outbox.ts';

/** Most anchors one pass enqueues. */
export const ANCHOR_BATCH = 1000;

/** Folded epochs up to `epoch` whose intent is not queued, on "EpochAnchor_intent_pending_idx": O(unqueued). */
export function pendingAnchorsQuery(epoch: number, take: number): Sql {
  return sql`SELECT epoch, "crossRoot", "evmRoot", "ipfsRoot", "sleevesRoot", "btcRoot" FROM "EpochAnchor"
    WHERE NOT "intentQueued" AND epoch <= ${epoch} ORDER BY epoch LIMIT ${take}`;
}

/** Enqueues an 'anchor' intent for every folded epoch up to `epoch` that has none yet; returns those epochs. */
export async function enqueueFoldedAnchors(p: Platform, epoch: number): Promise<number[]> {
  const rows = await p.db.prisma.$queryRaw<{ epoch: number; crossRoot: string; evmRoot: string; ipfsRoot: string; sleevesRoot: string; btcRoot: string }[]>(
    pendingAnchorsQuery(epoch, ANCHOR_BATCH),
  );
  const out: number[] = [];
  for (const a of rows) {
    const enqueued = await p.db.prisma.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${'anchor:' + a.epoch}))`;
      const has = await tx.chainOutbox.findFirst({ where: { kind: 'anchor', ref: `anchor:${a.epoch}` }, select: { id: true } });
      if (!has) await enqueueChainTx(tx, { kind: 'anchor', ref: `anchor:${a.epoch}`, epoch: a.epoch, payload: { ...a } });
      await tx.epochAnchor.update({ where: { epoch: a.epoch }, data: { intentQueued: true } });
      return !has;
    });
    if (enqueued) out.push(a.epoch);
  }
  return out;
}
