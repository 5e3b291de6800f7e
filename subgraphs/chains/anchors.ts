// A stack's epoch anchors: the coherence tuples of the epochs its memory was written in (each one
// commits those writes through ipfsRoot), newest first. Read by the stack reads (REST and GraphQL).
// The write epochs come from the memory context, the anchors from this one.
import type { Db, Tx } from '../../lib/db/index.ts';
import { writeEpochsOf } from '../memory/index.ts';

/** At most this many anchors per stack read (the newest). */
export const STACK_ANCHORS = 32;

export interface StackAnchor {
  epoch: number;
  crossRoot: string;
  ipfsRoot: string;
  /** The Medulla block that committed the tuple; null until one does. */
  blockHash: string | null;
  blockHeight: number | null;
  /** The EpochAnchor contract write on Cortex: pending until confirmed. */
  chainStatus: string;
}

/**
 * The anchors of several stacks in two queries: the memory context's newest write epochs per stack
 * (a little more than a read lists: the current epoch, and one within the fold grace, have no
 * anchor yet), then this context's EpochAnchors for them.
 */
export async function anchorsOfStacks(db: Db | Tx, stackIds: readonly string[]): Promise<Map<string, StackAnchor[]>> {
  const epochs = await writeEpochsOf(db, stackIds, STACK_ANCHORS + 2);
  const wanted = [...new Set([...epochs.values()].flat())];
  const rows = wanted.length
    ? await db.epochAnchor.findMany({
      where: { epoch: { in: wanted } },
      select: { epoch: true, crossRoot: true, ipfsRoot: true, blockHash: true, blockHeight: true, chainStatus: true },
    })
    : [];
  const byEpoch = new Map(rows.map((r) => [r.epoch, r]));
  const out = new Map<string, StackAnchor[]>();
  for (const id of stackIds) {
    out.set(id, (epochs.get(id) ?? []).flatMap((e) => byEpoch.get(e) ?? []).slice(0, STACK_ANCHORS));
  }
  return out;
}
