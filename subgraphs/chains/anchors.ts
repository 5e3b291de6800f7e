// A stack's epoch anchors: the coherence tuples of the epochs its memory was written in (each one
// commits those writes through ipfsRoot), newest first. Read by the stack reads (REST and GraphQL).
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

/** The anchors of several stacks in one query. */
export async function anchorsOfStacks(db: Db | Tx, stackIds: readonly string[]): Promise<Map<string, StackAnchor[]>> {
  const out = new Map<string, StackAnchor[]>(stackIds.map((id) => [id, []]));
  if (!stackIds.length) return out;
  const rows = await db.$queryRaw<Array<StackAnchor & { stackId: string }>>`
    SELECT w."stackId", a.epoch, a."crossRoot", a."ipfsRoot", a."blockHash", a."blockHeight", a."chainStatus"
    FROM (
      SELECT "stackId", epoch, ROW_NUMBER() OVER (PARTITION BY "stackId" ORDER BY epoch DESC) AS n
      FROM (SELECT DISTINCT m."stackId", m.epoch FROM "MemoryNode" m JOIN "EpochAnchor" e ON e.epoch = m.epoch WHERE m."stackId" = ANY(${[...stackIds]})) d
    ) w JOIN "EpochAnchor" a ON a.epoch = w.epoch
    WHERE w.n <= ${STACK_ANCHORS}
    ORDER BY w."stackId", a.epoch DESC`;
  for (const { stackId, ...a } of rows) out.get(stackId)?.push(a);
  return out;
}
