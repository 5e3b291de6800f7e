// The memory write and read paths, above the contexts they span. A write (perceive, remember) is
// one transaction over four contexts: the stack's lock and head (stacks), the sleeve's spend and
// drift (sleeves, through the economy's ledger), the sealed node and its shadow branch (memory),
// and the events; so the burn, the node, the head move and the drift commit together or not at
// all. Recall walks from the head (memory), then pays for it (sleeves) and opens the low-fidelity
// residue (residues) in one transaction.
//
// Concurrency: every write locks the stack row (SELECT ... FOR UPDATE) for its whole transaction, so
// the head is read, linked and moved by one writer at a time: no node is lost or linked twice.
import type { Platform } from '../lib/platform.ts';
import { badRequest, conflict, notFound } from '../lib/errors.ts';
import { recordEvent } from '../lib/events.ts';
import { balanceOf, sleeveAccount } from '../subgraphs/economy/index.ts';
import {
  checkDepth,
  checkText,
  hippocampusClient,
  reconstruct,
  recordShadowBranch,
  sealNode,
  writeEpoch,
  PERCEIVE_COST_MILLI,
  PERCEIVE_DRIFT_MILLI,
  PIN_COST_MILLI,
  RECALL_DRIFT_MILLI,
  RECALL_LEVEL_COST_MILLI,
  type ReconstructResult,
} from '../subgraphs/memory/index.ts';
import { openResidue } from '../subgraphs/residues/index.ts';
import {
  recordSleeveRead,
  recordSleeveWrite,
  requireActiveSleeve,
  requireKeyLease,
  requireSleeveOfStack,
  richestMemorySleeve,
  spendFromSleeve,
  type SleeveRow,
} from '../subgraphs/sleeves/index.ts';
import { getStackRow, lockStackForWrite, setEpisodicHead } from '../subgraphs/stacks/index.ts';

/** Writes hold the stack lock; under load they queue, so allow a generous wait. */
const TX = { maxWait: 30_000, timeout: 30_000 } as const;

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
    const costs = [{ token: 'compute' as const, milli: PERCEIVE_COST_MILLI }, ...(input.pin ? [{ token: 'memory' as const, milli: PIN_COST_MILLI }] : [])];
    await spendFromSleeve(tx, sleeve, costs, { reason: input.kind, ref: sleeve.id, epoch, activity: false }); // setEpisodicHead marks it

    const node = sealNode(p, stack, epoch, input.text, stack.episodicHead);
    await hippo.put({ ...node, epoch, stackId: stack.id, kind: input.kind, pinned: !!input.pin, sleeveId: sleeve.id }, tx);
    const branchId = await recordShadowBranch(tx, stack, { sleeveId: sleeve.id, seenHead: sleeve.seenHead }, epoch, node.cid);
    await setEpisodicHead(tx, stack.id, node.cid, { sleeveId: sleeve.id, epoch });
    await recordSleeveWrite(tx, sleeve.id, node.cid, PERCEIVE_DRIFT_MILLI);
    await recordEvent(tx, {
      subject: input.kind === 'perceive' ? `cog.perceive.${stack.id}` : `cog.memory.remembered.${stack.id}`,
      type: input.kind === 'perceive' ? 'perceive' : 'memory.remembered',
      data: { stackId: stack.id, sleeveId: sleeve.id, cid: node.cid, epoch, ...(input.kind === 'remember' ? { pinned: !!input.pin } : {}) },
      msgId: `${input.kind}:${node.cid}`,
    });
    return { cid: node.cid, epoch, stackId: stack.id, sleeveId: sleeve.id, embodimentType: sleeve.embodimentType, branchId };
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
    await spendFromSleeve(tx, sleeve, [{ token: 'memory', milli: PIN_COST_MILLI }], { reason: 'pin', ref: cid, epoch });
    await hippo.pin(cid, tx);
    return { cid, pinned: true as const, cost: { memory: Number(PIN_COST_MILLI) / 1000 } };
  }, TX);
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
    await requireKeyLease(p.db.prisma, payer.id);
  } else {
    payer = await richestMemorySleeve(p.db.prisma, stack.id);
  }
  const epoch = p.epochs.current();
  const empty = {
    stackId: stack.id,
    sleeveId: payer?.id ?? null,
    head: stack.episodicHead,
    fragments: [],
    broken: [],
    fidelity: 1,
    levels: 0,
    effectiveDepth: 0,
    cost: { memory: 0 },
    residueId: null,
  };
  if (!payer) return empty;
  const balance = Math.floor((await balanceOf(p.db.prisma, sleeveAccount(payer.id))).memory);
  const effectiveDepth = Math.max(0, Math.min(depth, input.memoryToken === undefined ? Infinity : Math.floor(input.memoryToken as number), balance));
  const result = effectiveDepth > 0 ? await reconstruct(p, stack, effectiveDepth, epoch) : { ...empty };
  const payerId = payer.id;
  const residueId = await p.db.prisma.$transaction(async (tx) => {
    const reader = await requireActiveSleeve(tx, payerId);
    if (result.levels > 0) {
      await spendFromSleeve(tx, reader, [{ token: 'memory', milli: BigInt(result.levels) * RECALL_LEVEL_COST_MILLI }], {
        reason: 'recall',
        ref: payerId,
        epoch,
      });
    }
    await recordSleeveRead(tx, payerId, result.head, RECALL_DRIFT_MILLI);
    if (result.fidelity >= p.config.fidelityMin) return null;
    const { residue } = await openResidue(tx, {
      kind: 'historical-non-canonical',
      trigger: `recall fidelity ${result.fidelity.toFixed(3)} below ${p.config.fidelityMin}`,
      stackId: stack.id,
      sleeveId: payerId,
      epoch,
      evidence: { head: result.head, fidelity: result.fidelity, depth: effectiveDepth, broken: result.broken.slice(0, 64), ok: result.fragments.length },
      dedupeKey: `historical-non-canonical:${stack.id}:${result.head}:${epoch}`,
      expiryEpochs: p.config.residueExpiryEpochs,
    });
    return residue.id;
  }, TX);
  return { ...result, stackId: stack.id, sleeveId: payerId, effectiveDepth, cost: { memory: result.levels }, residueId };
}
