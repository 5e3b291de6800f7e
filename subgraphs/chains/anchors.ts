// A stack's epoch anchors: the coherence tuples of the epochs its memory was written in (each one
// commits those writes through ipfsRoot), newest first. Read by the stack reads (REST and GraphQL),
// which take the write epochs from the memory context (flows/stack-reads.ts).
import { sql, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { jsonValue, type ReadPart } from '../../lib/db/statement.ts';

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

/**
 * The anchors of stacks as one read of a read statement (lib/db/statement.ts readStatement), given
 * an SQL query of ("stackId", epoch) rows: each stack's newest write epochs (the memory context's).
 */
export function anchorsRead(stackEpochs: Sql): ReadPart<Map<string, StackAnchor[]>> {
  return {
    expr: sql`SELECT json_agg(json_build_object('s', w."stackId", 'e', a.epoch, 'c', a."crossRoot", 'i', a."ipfsRoot", 'h', a."blockHash",
        'n', a."blockHeight", 'st', a."chainStatus") ORDER BY w."stackId", a.epoch DESC)
      FROM (${stackEpochs}) w JOIN "EpochAnchor" a ON a.epoch = w.epoch`,
    parse: (v) => {
      const out = new Map<string, StackAnchor[]>();
      type Row = { s: string; e: number; c: string; i: string; h: string | null; n: number | null; st: string };
      for (const r of (jsonValue(v) as Row[] | null) ?? []) {
        let l = out.get(r.s);
        if (!l) out.set(r.s, (l = []));
        if (l.length < STACK_ANCHORS) l.push({ epoch: r.e, crossRoot: r.c, ipfsRoot: r.i, blockHash: r.h, blockHeight: r.n, chainStatus: r.st });
      }
      return out;
    },
  };
}

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
