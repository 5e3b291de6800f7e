// A stack's epoch anchors: the coherence tuples of the epochs its memory was written in (each one
// commits those writes through ipfsRoot), newest first. Read by the stack reads (REST and GraphQL),
// which take the write epochs from the memory context (flows/stack-reads.ts).
import type { Db, Tx } from '../../lib/db/index.ts';

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

/** Write epochs to ask for per stack: a little more than a read lists (the current epoch, and one within the fold grace, have no anchor yet). */
export const ANCHOR_EPOCHS_WANTED = STACK_ANCHORS + 2;

/** The anchors of several stacks, given each stack's newest write epochs (newest first): one query. */
export async function anchorsOfEpochs(db: Db | Tx, epochs: ReadonlyMap<string, number[]>): Promise<Map<string, StackAnchor[]>> {
  const stackIds = [...epochs.keys()];
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
