// Memory: perceive and remember write encrypted nodes to the Hippocampus DAG and move the stack's
// episodic head; recall walks back from the head and decrypts. Keys: epochKey(masterSecret,
// stackId, epoch) per node epoch, derived only here (the Hippocampus never sees a key or plaintext).
//
// Concurrency: every write locks the stack row (SELECT ... FOR UPDATE) for its whole transaction, so
// the head is read, linked and moved by one writer at a time: no node is lost or linked twice.
// Shadow mode: when the head was last moved in this epoch by another co-resident sleeve, and the
// writer has not seen that head, the write is recorded as a MemoryBranch (base = the head the
// writer last saw); the node still links to the current head so everything stays reachable, and
// the memory-reconciler pass merges the branch (mergeBranch) and opens the residue.
import { randomBytes } from 'node:crypto';
import type { Db, Tx } from '../../lib/db/index.ts';
import type { Platform } from '../../lib/platform.ts';
import { Problem, badRequest, conflict, notFound } from '../../lib/errors.ts';
import { epochKey, fromUtf8, open, seal, DecryptError } from '../../lib/crypto.ts';
import { recordEvent } from '../../lib/events.ts';
import { withTimeout } from '../../lib/timeout.ts';
import { balanceOf, burn, sleeveAccount } from '../economy/index.ts';
import { openResidue } from '../residues/index.ts';
import { getStackRow, lockStack, setEpisodicHead, stackMasterSecret, type StackRow } from '../stacks/index.ts';
import { addDrift, getSleeveRow, requireActiveSleeve, requireSleeveOfStack, richestMemorySleeve, type SleeveRow } from '../sleeves/index.ts';
import { computeCid } from './hippocampus/cid.ts';
import { hippocampusClient } from './hippocampus/client.ts';
import { MAX_WALK_DEPTH, type DagNode } from './hippocampus/store.ts';

export const MAX_TEXT_BYTES = 64 * 1024;
export const PERCEIVE_COST_MILLI = 500n;
export const PIN_COST_MILLI = 1000n;
export const RECALL_LEVEL_COST_MILLI = 1000n;
export const PERCEIVE_DRIFT_MILLI = 1000;
export const RECALL_DRIFT_MILLI = 100;

/** Writes hold the stack lock; under load they queue, so allow a generous wait. */
const TX = { maxWait: 30_000, timeout: 30_000 } as const;

function checkText(text: unknown, field: string): string {
  if (typeof text !== 'string' || text.length === 0) throw badRequest(`${field} must be a non-empty string`, [{ path: field, message: 'is required' }]);
  if (Buffer.byteLength(text) > MAX_TEXT_BYTES) throw badRequest(`${field} is larger than ${MAX_TEXT_BYTES} bytes`, [{ path: field, message: 'is too long' }]);
  return text;
}

async function requireLease(tx: Tx | Db, sleeveId: string): Promise<void> {
  const lease = await tx.keyLease.findUnique({ where: { sleeveId } });
  if (!lease?.active) throw conflict(`sleeve ${sleeveId} holds no active key lease`, 'NO_KEY_LEASE');
}

export interface WriteInput {
  sleeveId: string;
  stackId?: string;
  text: string;
  kind: 'perceive' | 'remember';
  pin?: boolean;
}

export interface WriteResult {
  cid: string;
  epoch: number;
  stackId: string;
  sleeveId: string;
  embodimentType: string;
  branchId: string | null;
}

/** The stack row fields a write needs, locked FOR UPDATE until the transaction ends (404 when missing). */
async function lockStackForWrite(tx: Tx, stackId: string) {
  const rows = await tx.$queryRaw<Array<Pick<StackRow, 'id' | 'episodicHead' | 'headSleeveId' | 'headEpoch' | 'masterSecret'>>>`
    SELECT id, "episodicHead", "headSleeveId", "headEpoch", "masterSecret" FROM "Stack" WHERE id = ${stackId} FOR UPDATE`;
  if (!rows.length) throw notFound('Stack', stackId);
  return rows[0];
}

/** Longest a write waits for Medulla's answer on the current epoch. */
const WRITE_EPOCH_WAIT_MS = 250;

/**
 * The epoch a write is stamped with. Beside Medulla (embedded) the follower is exact; in another
 * process the bus may not have announced the newest block yet (one mined through the other
 * gateway a moment ago), so Medulla is asked (one call shared by concurrent writes).
 */
async function writeEpoch(p: Platform): Promise<number> {
  if (p.local.has('medulla')) return p.epochs.current();
  // A slow or stopped Medulla must not hold writes up: past a short wait the follower's view stands.
  return withTimeout(() => p.epochs.refresh(), WRITE_EPOCH_WAIT_MS).then((i) => i.epoch, () => p.epochs.current());
}

// Kept to few statements: under PGlite every statement of every write is serialised.
async function writeMemory(p: Platform, input: WriteInput): Promise<WriteResult> {
  const hippo = hippocampusClient(p);
  const epoch = await writeEpoch(p);
  return p.db.prisma.$transaction(async (tx) => {
    let sleeve: SleeveRow;
    let stack: Awaited<ReturnType<typeof lockStackForWrite>>;
    if (input.stackId !== undefined) {
      stack = await lockStackForWrite(tx, input.stackId);
      sleeve = await requireActiveSleeve(tx, input.sleeveId);
      requireSleeveOfStack(sleeve, stack.id);
    } else {
      sleeve = await requireActiveSleeve(tx, input.sleeveId);
      stack = await lockStackForWrite(tx, sleeve.stackId);
    }
    // Alive implies an active key lease: decommission ends both in one transaction.
    const account = sleeveAccount(sleeve.id);
    const costs = [{ token: 'compute' as const, milli: PERCEIVE_COST_MILLI }, ...(input.pin ? [{ token: 'memory' as const, milli: PIN_COST_MILLI }] : [])];
    await burn(tx, account, costs, { reason: input.kind, ref: sleeve.id, epoch, stackId: stack.id, activity: false }); // setEpisodicHead marks it

    const key = epochKey(stackMasterSecret(p, stack), stack.id, epoch);
    const data = JSON.stringify(seal(key, input.text));
    const links = stack.episodicHead ? [stack.episodicHead] : [];
    const cid = computeCid({ data, links, epoch, stackId: stack.id });
    await hippo.put({ cid, data, links, epoch, stackId: stack.id, kind: input.kind, pinned: !!input.pin, sleeveId: sleeve.id }, tx);

    let branchId: string | null = null;
    const shadowed = stack.episodicHead !== null && stack.headSleeveId !== null && stack.headSleeveId !== sleeve.id &&
      stack.headEpoch === epoch && sleeve.seenHead !== stack.episodicHead;
    if (shadowed) {
      branchId = `branch:${randomBytes(8).toString('hex')}`;
      await tx.memoryBranch.create({ data: { id: branchId, stackId: stack.id, sleeveId: sleeve.id, baseCid: sleeve.seenHead, headCid: cid } });
    }
    await setEpisodicHead(tx, stack.id, cid, { sleeveId: sleeve.id, epoch });
    // Conditional: a decommission or freeze that committed since the read above refuses the write.
    const moved = await tx.$executeRaw`UPDATE "Sleeve" SET "driftMilli" = "driftMilli" + ${PERCEIVE_DRIFT_MILLI}, "seenHead" = ${cid}
      WHERE id = ${sleeve.id} AND alive = true AND frozen = false`;
    if (moved === 0) throw conflict(`sleeve ${sleeve.id} was decommissioned or frozen meanwhile`, 'SLEEVE_NOT_ACTIVE');
    await recordEvent(tx, {
      subject: input.kind === 'perceive' ? `cog.perceive.${stack.id}` : `cog.memory.remembered.${stack.id}`,
      type: input.kind === 'perceive' ? 'perceive' : 'memory.remembered',
      data: { stackId: stack.id, sleeveId: sleeve.id, cid, epoch, ...(input.kind === 'remember' ? { pinned: !!input.pin } : {}) },
      msgId: `${input.kind}:${cid}`,
    });
    return { cid, epoch, stackId: stack.id, sleeveId: sleeve.id, embodimentType: sleeve.embodimentType, branchId };
  }, TX);
}

export interface PerceiveResult extends WriteResult {
  thought: string;
  cost: { compute: number };
}

/** Perceive (both forms): encrypt, link to the head, move it; 0.5 compute, drift +1. */
export async function perceive(p: Platform, input: { sleeveId: string; stackId?: string; text: unknown; field?: string }): Promise<PerceiveResult> {
  // `field`: the request's name for the text in errors (Shape A sends it as `input`).
  const text = checkText(input.text, input.field ?? 'text');
  const r = await writeMemory(p, { sleeveId: input.sleeveId, stackId: input.stackId, text, kind: 'perceive' });
  return { ...r, thought: `${r.embodimentType}@${r.sleeveId.slice(-6)} ${text}`, cost: { compute: Number(PERCEIVE_COST_MILLI) / 1000 } };
}

/** Remember: the perceive write (kind 'remember'); pin costs 1 memory. Stack form: the richest sleeve writes. */
export async function remember(p: Platform, input: { stackId?: string; sleeveId?: string; text: unknown; pin: unknown }): Promise<WriteResult> {
  const text = checkText(input.text, 'text');
  if (input.pin !== undefined && typeof input.pin !== 'boolean') throw badRequest('pin must be a boolean', [{ path: 'pin', message: 'must be boolean' }]);
  let sleeveId = input.sleeveId;
  if (!sleeveId && !input.stackId) throw badRequest('remember needs a stackId or a sleeveId', [{ path: 'stackId', message: 'or sleeveId is required' }]);
  if (!sleeveId) {
    const stack = await getStackRow(p.db.prisma, input.stackId!);
    const payer = await richestMemorySleeve(p.db.prisma, stack.id);
    if (!payer) throw conflict(`stack ${stack.id} has no alive sleeve to write with`, 'NO_ALIVE_SLEEVE');
    sleeveId = payer.id;
  }
  return writeMemory(p, { sleeveId, stackId: input.stackId, text, kind: 'remember', pin: input.pin === true });
}

/** Pins a node for a sleeve of its stack: 1 memory token (none when already pinned). */
export async function pinNode(p: Platform, cid: string, payer: string): Promise<{ cid: string; pinned: true; cost: { memory: number } }> {
  const hippo = hippocampusClient(p);
  const epoch = p.epochs.current();
  return p.db.prisma.$transaction(async (tx) => {
    const sleeve = await requireActiveSleeve(tx, payer);
    const meta = await hippo.meta(cid, tx);
    if (!meta) throw notFound('Memory node', cid);
    requireSleeveOfStack(sleeve, meta.stackId);
    if (meta.pinned) return { cid, pinned: true as const, cost: { memory: 0 } };
    await burn(tx, sleeveAccount(sleeve.id), [{ token: 'memory', milli: PIN_COST_MILLI }], { reason: 'pin', ref: cid, epoch, stackId: meta.stackId });
    await hippo.pin(cid, tx);
    return { cid, pinned: true as const, cost: { memory: Number(PIN_COST_MILLI) / 1000 } };
  }, TX);
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

/** The recall walk (shared by recall and the DHF): breadth-first from the head, decrypt per epoch. */
export async function reconstruct(p: Platform, stack: StackRow, depth: number, readerEpoch = p.epochs.current()): Promise<ReconstructResult> {
  const head = stack.episodicHead;
  if (!head || depth < 1) return { head, fragments: [], broken: [], fidelity: 1, levels: 0 };
  const walk = await hippocampusClient(p).walk(head, depth, readerEpoch);
  const master = stackMasterSecret(p, stack);
  const keys = new Map<number, Uint8Array>();
  const fragments: Fragment[] = [];
  const undecryptable: string[] = [];
  for (const node of walk.nodes) {
    try {
      if (node.stackId !== stack.id || !node.ciphertext) throw new DecryptError();
      let key = keys.get(node.epoch);
      if (!key) keys.set(node.epoch, (key = epochKey(master, stack.id, node.epoch)));
      fragments.push({ node, text: fromUtf8(open(key, node.ciphertext)) });
    } catch {
      undecryptable.push(node.cid);
    }
  }
  const broken = [...walk.gated, ...walk.missing, ...undecryptable];
  return { head, fragments, broken, fidelity: fidelityOf(fragments.length, broken.length), levels: walk.levels };
}

export interface RecallInput {
  stackId: string;
  sleeveId?: string;
  depth: unknown;
  memoryToken?: unknown;
}

export interface RecallResult extends ReconstructResult {
  stackId: string;
  sleeveId: string | null;
  effectiveDepth: number;
  cost: { memory: number };
  residueId: string | null;
}

export function checkDepth(depth: unknown): number {
  if (typeof depth !== 'number' || !Number.isInteger(depth) || depth < 1 || depth > MAX_WALK_DEPTH) {
    throw badRequest(`depth must be an integer from 1 to ${MAX_WALK_DEPTH}`, [{ path: 'depth', message: 'is out of range' }]);
  }
  return depth;
}

/**
 * Recall: effective depth = min(depth, memoryToken, the payer's memory balance); 1 memory per level
 * walked, drift +0.1 on the payer; fidelity below the minimum opens a historical-non-canonical residue.
 */
export async function recall(p: Platform, input: RecallInput): Promise<RecallResult> {
  const depth = checkDepth(input.depth);
  if (input.memoryToken !== undefined && (typeof input.memoryToken !== 'number' || !Number.isFinite(input.memoryToken) || input.memoryToken < 0)) {
    throw badRequest('memoryToken must be a non-negative number', [{ path: 'memoryToken', message: 'is invalid' }]);
  }
  const stack = await getStackRow(p.db.prisma, input.stackId);
  let payer: SleeveRow | null;
  if (input.sleeveId !== undefined) {
    payer = await requireActiveSleeve(p.db.prisma, input.sleeveId);
    requireSleeveOfStack(payer, stack.id);
    await requireLease(p.db.prisma, payer.id);
  } else {
    payer = await richestMemorySleeve(p.db.prisma, stack.id);
  }
  const epoch = p.epochs.current();
  const empty = { stackId: stack.id, sleeveId: payer?.id ?? null, head: stack.episodicHead, fragments: [], broken: [], fidelity: 1, levels: 0, effectiveDepth: 0, cost: { memory: 0 }, residueId: null };
  if (!payer) return empty;
  const balance = Math.floor((await balanceOf(p.db.prisma, sleeveAccount(payer.id))).memory);
  const effectiveDepth = Math.max(0, Math.min(depth, input.memoryToken === undefined ? Infinity : Math.floor(input.memoryToken as number), balance));
  const result = effectiveDepth > 0 ? await reconstruct(p, stack, effectiveDepth, epoch) : { ...empty };
  const payerId = payer.id;
  const residueId = await p.db.prisma.$transaction(async (tx) => {
    await requireActiveSleeve(tx, payerId);
    if (result.levels > 0) {
      await burn(tx, sleeveAccount(payerId), [{ token: 'memory', milli: BigInt(result.levels) * RECALL_LEVEL_COST_MILLI }], { reason: 'recall', ref: payerId, epoch, stackId: stack.id });
    }
    await addDrift(tx, payerId, RECALL_DRIFT_MILLI);
    if (result.head) await tx.sleeve.update({ where: { id: payerId }, data: { seenHead: result.head } });
    if (result.fidelity >= p.config.fidelityMin) return null;
    const { residue } = await openResidue(tx, {
      kind: 'historical-non-canonical',
      trigger: `recall fidelity ${result.fidelity.toFixed(3)} below ${p.config.fidelityMin}`,
      stackId: stack.id, sleeveId: payerId, epoch,
      evidence: { head: result.head, fidelity: result.fidelity, depth: effectiveDepth, broken: result.broken.slice(0, 64), ok: result.fragments.length },
      dedupeKey: `historical-non-canonical:${stack.id}:${result.head}:${epoch}`,
      expiryEpochs: p.config.residueExpiryEpochs,
    });
    return residue.id;
  }, TX);
  return { ...result, stackId: stack.id, sleeveId: payerId, effectiveDepth, cost: { memory: result.levels }, residueId };
}

// ---------------------------------------------------------------- shadow-mode branches

export type BranchRow = NonNullable<Awaited<ReturnType<Db['memoryBranch']['findUnique']>>>;

export function openBranches(db: Db | Tx, stackId?: string): Promise<BranchRow[]> {
  return db.memoryBranch.findMany({ where: { status: 'open', ...(stackId ? { stackId } : {}) }, orderBy: { createdAt: 'asc' } });
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
      subject: `cog.memory.branch.merged.${stack.id}`, type: 'memory.branch.merged',
      data: { stackId: stack.id, branchId, sleeveId: b.sleeveId, baseCid: b.baseCid, headCid: b.headCid, mergedCid: stack.episodicHead },
      msgId: `branch-merged:${branchId}`,
    });
    return merged;
  }, TX);
}
