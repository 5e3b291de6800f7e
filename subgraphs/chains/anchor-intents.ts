// The epoch-anchor pass's chains side: each folded epoch (an EpochAnchor row, written by the
// Thalamus) becomes one 'anchor' intent in the Cortex outbox, once.
import type { Platform } from '../../lib/platform.ts';
import { enqueueChainTx } from './outbox.ts';

/** Enqueues an 'anchor' intent for every folded epoch up to `epoch` that has none yet; returns those epochs. */
export async function enqueueFoldedAnchors(p: Platform, epoch: number): Promise<number[]> {
  const rows = await p.db.prisma.$queryRaw<{ epoch: number; crossRoot: string; evmRoot: string; ipfsRoot: string; sleevesRoot: string; btcRoot: string }[]>`
    SELECT a.epoch, a."crossRoot", a."evmRoot", a."ipfsRoot", a."sleevesRoot", a."btcRoot" FROM "EpochAnchor" a
    WHERE a.epoch <= ${epoch} AND NOT EXISTS (SELECT 1 FROM "ChainOutbox" o WHERE o.kind = 'anchor' AND o.ref = 'anchor:' || a.epoch)
    ORDER BY a.epoch LIMIT 1000`;
  for (const a of rows) {
    await p.db.prisma.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${'anchor:' + a.epoch}))`;
      if (await tx.chainOutbox.findFirst({ where: { kind: 'anchor', ref: `anchor:${a.epoch}` } })) return;
      await enqueueChainTx(tx, { kind: 'anchor', ref: `anchor:${a.epoch}`, epoch: a.epoch, payload: { ...a } });
    });
  }
  return rows.map((r) => r.epoch);
}
