// Memory: the sealed nodes a write adds to the Hippocampus DAG, the recall walk that decrypts them,
// and shadow branches. Keys: epochKey(masterSecret, stackId, epoch) per node epoch, derived only
// here (the Hippocampus never sees a key or plaintext). The write and read paths that span the
// contexts are composed above them: perceive, remember and pin in flows/memory.ts, recall in
// flows/recall.ts.
// Shadow mode: when the head was last moved in this epoch by another co-resident sleeve, and the
// writer has not seen that head, the write is recorded as a MemoryBranch (base = the head the
// writer last saw); the node still links to the current head so everything stays reachable, and
// the memory-reconciler pass merges the branch (mergeBranch) and opens the residue.
import { sql, type Db, type Tx } from '../../lib/db/index.ts';
import { jsonValue, runStatement, type StatementPart } from '../../lib/db/statement.ts';
import type { Platform } from '../../lib/platform.ts';
import { Problem, badRequest, conflict, notFound } from '../../lib/errors.ts';
import { fromUtf8, open, randomHex, seal, DecryptError } from '../../lib/crypto.ts';
import { eventsFromRowsPart, recordEvent } from '../../lib/events.ts';
import { lockStack, stackEpochKey, stackHeadSql, type StackReadRow, type StackRow } from '../stacks/index.ts';
import { computeCid } from './hippocampus/cid.ts';
import { hippocampusClient } from './hippocampus/client.ts';
import { MAX_WALK_DEPTH, walkFromChainRows, type DagNode } from './hippocampus/store.ts';

export const MAX_TEXT_BYTES = 64 * 1024;
export const PERCEIVE_COST_MILLI = 500n;
export const PIN_COST_MILLI = 1000n;
export const RECALL_LEVEL_COST_MILLI = 1000n;
export const PERCEIVE_DRIFT_MILLI = 1000;
export const RECALL_DRIFT_MILLI = 100;

/** Writes hold the stack lock; under load they queue, so allow a generous wait. */
const TX = { maxWait: 30_000, timeout: 30_000 } as const;

export function checkText(text: unknown, field: string): string {
  if (typeof text !== 'string' || text.length === 0) throw badRequest(`${field} must be a non-empty string`, [{ path: field, message: 'is required' }]);
  if (Buffer.byteLength(text) > MAX_TEXT_BYTES) throw badRequest(`${field} is larger than ${MAX_TEXT_BYTES} bytes`, [{ path: field, message: 'is too long' }]);
  return text;
}

export interface SealedNode {
  cid: string;
  data: string;
  links: string[];
}

/** The node a write adds: the text sealed under the stack's key of the epoch, linked to the head it replaces. */
export function sealNode(p: Platform, stack: Pick<StackRow, 'id' | 'masterSecret'>, epoch: number, text: string, head: string | null): SealedNode {
  return sealNodeWith(stackEpochKey(p, stack, epoch), stack.id, epoch, text, head);
}

/** sealNode with the epoch's key already derived (a batch of writes derives it once). */
export function sealNodeWith(key: Uint8Array, stackId: string, epoch: number, text: string, head: string | null): SealedNode {
  const data = JSON.stringify(seal(key, text));
  const links = head ? [head] : [];
  return { cid: computeCid({ data, links, epoch, stackId }), data, links };
}

/**
 * Shadow mode: when the head was last moved in this epoch by another co-resident sleeve that the
 * writer has not seen, the write is recorded as a branch (base = the head the writer last saw);
 * the node still links to the current head, and the memory-reconciler merges the branch.
 */
export function isShadowWrite(
  head: { episodicHead: string | null; headSleeveId: string | null; headEpoch: number | null },
  writer: { sleeveId: string; seenHead: string | null },
  epoch: number,
): boolean {
  return (
    head.episodicHead !== null &&
    head.headSleeveId !== null &&
    head.headSleeveId !== writer.sleeveId &&
    head.headEpoch === epoch &&
    writer.seenHead !== head.episodicHead
  );
}

export const newBranchId = () => `branch:${randomHex(8)}`;

/** The branches of a group commit's shadow writes (ids from newBranchId), as part of the write's one statement (lib/db/statement.ts). */
export function shadowBranchesPart(
  branches: ReadonlyArray<{ id: string; stackId: string; sleeveId: string; baseCid: string | null; headCid: string }>,
): StatementPart | null {
  if (!branches.length) return null;
  return {
    ctes: [
      {
        name: 'memory_branches',
        body: sql`INSERT INTO "MemoryBranch" (id, "stackId", "sleeveId", "baseCid", "headCid")
          SELECT b.id, b."stackId", b."sleeveId", b."baseCid", b."headCid"
          FROM jsonb_to_recordset(${JSON.stringify(branches)}::jsonb) AS b(id text, "stackId" text, "sleeveId" text, "baseCid" text, "headCid" text)`,
      },
    ],
  };
}

export interface Fragment {
  node: DagNode;
  text: string;
}

export interface ReconstructResult {
  head: string | null;
  fragments: Fragment[];
  /** Gated, unreachable or undecryptable CIDs. */
  broken: string[];
  fidelity: number;
  levels: number;
}

export const fidelityOf = (ok: number, broken: number) => (broken === 0 ? 1 : ok / (ok + broken));

/**
 * The recall walk (shared by recall and the DHF): breadth-first from the head, decrypt per epoch.
 * `chainRows`: the walk's rows already read with the stack (walkChainSql over its head, at least
 * `depth` deep), used when they cover the walk; otherwise, or without them, the Hippocampus walks.
 */
export async function reconstruct(
  p: Platform,
  stack: StackReadRow,
  depth: number,
  readerEpoch = p.epochs.current(),
  chainRows?: readonly string[],
): Promise<ReconstructResult> {
  const head = stack.episodicHead;
  if (!head || depth < 1) return { head, fragments: [], broken: [], fidelity: 1, levels: 0 };
  const walk =
    (chainRows !== undefined ? walkFromChainRows(chainRows, head, depth, readerEpoch) : undefined) ??
    (await hippocampusClient(p).walk(head, depth, readerEpoch));
  const keys = new Map<number, Uint8Array>();
  const fragments: Fragment[] = [];
  const undecryptable: string[] = [];
  for (const node of walk.nodes) {
    try {
      if (node.stackId !== stack.id || !node.ciphertext) throw new DecryptError();
      let key = keys.get(node.epoch);
      if (!key) keys.set(node.epoch, (key = stackEpochKey(p, stack, node.epoch)));
      fragments.push({ node, text: fromUtf8(open(key, node.ciphertext)) });
    } catch {
      undecryptable.push(node.cid);
    }
  }
  const broken = [...walk.gated, ...walk.missing, ...undecryptable];
  return { head, fragments, broken, fidelity: fidelityOf(fragments.length, broken.length), levels: walk.levels };
}

export function checkDepth(depth: unknown): number {
  if (typeof depth !== 'number' || !Number.isInteger(depth) || depth < 1 || depth > MAX_WALK_DEPTH) {
    throw badRequest(`depth must be an integer from 1 to ${MAX_WALK_DEPTH}`, [{ path: 'depth', message: 'is out of range' }]);
  }
  return depth;
}

// ---------------------------------------------------------------- shadow-mode branches

export type BranchRow = NonNullable<Awaited<ReturnType<Db['memoryBranch']['findUnique']>>>;

/** Open branches, the oldest first (at most `take`). */
export function openBranches(db: Db | Tx, stackId?: string, take?: number): Promise<BranchRow[]> {
  return db.memoryBranch.findMany({ where: { status: 'open', ...(stackId ? { stackId } : {}) }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }], take });
}

/**
 * Merges open branches into the main line in one statement, with their events: each records its
 * stack's head as of the statement as mergedCid (the branch head is an ancestor of every head since,
 * as in mergeBranch; no stack lock is needed to read one). Branches no longer open, or of a stack
 * without a head, are left as they are. Returns the ids merged.
 */
export async function mergeBranches(p: Platform, ids: readonly string[]): Promise<string[]> {
  if (!ids.length) return [];
  const out = await runStatement(p.db, [
    {
      ctes: [
        {
          name: 'branch_merged',
          body: sql`UPDATE "MemoryBranch" m SET status = 'merged', "mergedCid" = h.head, "mergedAt" = now()
            FROM (SELECT b.id, ${stackHeadSql(sql`b."stackId"`)} AS head FROM "MemoryBranch" b WHERE b.id = ANY(${[...ids]}::text[]) AND b.status = 'open') h
            WHERE m.id = h.id AND m.status = 'open' AND h.head IS NOT NULL
            RETURNING m.id, m."stackId", m."sleeveId", m."baseCid", m."headCid", m."mergedCid", m."createdAt"`,
        },
      ],
      outputs: [{ name: 'merged', expr: sql`(SELECT json_agg(id ORDER BY "createdAt", id) FROM branch_merged)` }],
    },
    eventsFromRowsPart(
      'branch_events',
      sql`SELECT 'cog.memory.branch.merged.' || "stackId" AS subject, 'branch-merged:' || id AS "msgId", 'memory.branch.merged' AS type,
          jsonb_build_object('stackId', "stackId", 'branchId', id, 'sleeveId', "sleeveId", 'baseCid', "baseCid", 'headCid', "headCid", 'mergedCid', "mergedCid") AS data
        FROM branch_merged ORDER BY "createdAt", id`,
    ),
  ]);
  return (jsonValue(out.merged) as string[] | null) ?? [];
}

/**
 * Merges an open branch into the main line. The branch head is already an ancestor of the stack
 * head (every write links to the head it replaced), so the merge records that head as mergedCid.
 */
export async function mergeBranch(p: Platform, branchId: string): Promise<BranchRow> {
  return p.db.prisma.$transaction(async (tx) => {
    const b = await tx.memoryBranch.findUnique({ where: { id: branchId } });
    if (!b) throw notFound('Memory branch', branchId);
    const stack = await lockStack(tx, b.stackId);
    if (b.status !== 'open') throw conflict(`branch ${branchId} is ${b.status}`, 'BRANCH_NOT_OPEN');
    if (!stack.episodicHead) throw new Problem(409, 'NO_HEAD', 'Conflict', `stack ${stack.id} has no episodic head`);
    const merged = await tx.memoryBranch.update({ where: { id: branchId }, data: { status: 'merged', mergedCid: stack.episodicHead, mergedAt: new Date() } });
    await recordEvent(tx, {
      subject: `cog.memory.branch.merged.${stack.id}`,
      type: 'memory.branch.merged',
      data: { stackId: stack.id, branchId, sleeveId: b.sleeveId, baseCid: b.baseCid, headCid: b.headCid, mergedCid: stack.episodicHead },
      msgId: `branch-merged:${branchId}`,
    });
    return merged;
  }, TX);
}
