// The memory write path, above the contexts it spans. A write (perceive, remember) is one
// transaction over four contexts: the stack's lock and head (stacks), the sleeve's spend and drift
// (sleeves, through the economy's ledger), the sealed node and its shadow branch (memory), and the
// events; so the burn, the node, the head move and the drift commit together or not at all. The
// read path (recall) is in flows/recall.ts.
//
// Concurrency: every write locks the stack row (SELECT ... FOR UPDATE) for its whole transaction, so
// the head is read, linked and moved by one writer at a time: no node is lost or linked twice.
import type { Platform } from '../lib/platform.ts';
import { badRequest, conflict, notFound } from '../lib/errors.ts';
import { recordEvent } from '../lib/events.ts';
import {
  checkText,
  hippocampusClient,
  recordShadowBranch,
  sealNode,
  writeEpoch,
  PERCEIVE_COST_MILLI,
  PERCEIVE_DRIFT_MILLI,
  PIN_COST_MILLI,
} from '../subgraphs/memory/index.ts';
import {
  recordSleeveWrite,
  requireActiveSleeve,
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
