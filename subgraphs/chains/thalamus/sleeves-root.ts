// The fold's sleevesRoot kept up to date instead of recomputed (docs/scale.md, "Thalamus fold"):
// the alive sleeves' leaves in a MerkleLeafSet (ordered by id, cached subtree hashes), changed by
// the sleeves whose leaf changed since the last read. The root is the same MTH over the same
// leaves as `sleevesRootOf` (coherence.ts), so nothing committed changes.
import { toHex } from '../../../lib/crypto.ts';
import { MerkleLeafSet } from '../../../lib/merkle.ts';
import { sleeveLeafData } from './coherence.ts';
import type { SleeveSource } from './sources.ts';

/** A sleeve as the root sees it. */
export interface SleeveLeaf {
  id: string;
  type: string;
  alive: boolean;
}

/**
 * Where the leaves come from (the sleeves context, composed in flows/thalamus-sources.ts): with a
 * null cursor every alive sleeve; with the cursor a read returned, at least every sleeve whose leaf
 * changed since that read (more is harmless: each row is applied as its current state).
 */
export interface SleeveLeafFeed<C> {
  read(since: C | null): Promise<{ rows: SleeveLeaf[]; cursor: C }>;
}

export interface IncrementalSleevesRoot extends SleeveSource {
  /** What the last completed read cost: rows read, and whether it was the full read of a start. */
  readonly last: { rows: number; full: boolean; changedFrom: number };
}

/**
 * A SleeveSource whose first call reads every alive sleeve and later calls read only the changes.
 * Calls run one at a time; a read that fails leaves the set and the cursor as they were, so the
 * next call reads the same changes again.
 */
export function incrementalSleevesRoot<C>(feed: SleeveLeafFeed<C>): IncrementalSleevesRoot {
  const set = new MerkleLeafSet();
  let cursor: C | null = null;
  const last = { rows: 0, full: false, changedFrom: -1 };
  let chain: Promise<unknown> = Promise.resolve();
  const update = async () => {
    const full = cursor === null;
    const { rows, cursor: next } = await feed.read(cursor);
    const leaves = rows.map((r) => ({ key: r.id, data: r.alive ? sleeveLeafData(r.type, r.id) : null }));
    if (full) set.reset(leaves.filter((l): l is { key: string; data: string } => l.data !== null));
    last.changedFrom = full ? 0 : set.apply(leaves);
    cursor = next;
    last.rows = rows.length;
    last.full = full;
    return { root: toHex(set.root()), count: set.size };
  };
  return {
    last,
    sleevesRoot() {
      const run = chain.then(update, update);
      chain = run.catch(() => {});
      return run;
    },
  };
}
