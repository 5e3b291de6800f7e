// The memory write path, above the contexts it spans. A write (perceive, remember) is one
// statement over four contexts: the stack's head (stacks), the sleeve's spend and drift (sleeves,
// through the economy's ledger), the sealed node and its shadow branch (memory), and the events; so
// the burn, the node, the head move and the drift commit together or not at all.
//
// Each context contributes the part of the statement that writes its own tables (lib/db/statement.ts:
// data-modifying CTEs and the checks of its rules); this flow composes them, and the database runs
// them as one statement in one round trip. The read before it is one statement too (each context's
// read part). The read path (recall) is in flows/recall.ts.
//
// Group commit (lib/group-commit.ts): the writes queued while batches commit form the next batch,
// across stacks: one read statement and one write statement for all of them, each stack's head
// moved once, every node of a stack linked to the one before it in arrival order, each caller
// answered with its own CID or refusal. A stack is in one running batch at a time, so its writes
// keep their order. A batch reads its stacks, their writers' sleeves and balances, decides which
// writes go through (the refusals are the same as one write's: 404, 409, 403, 402), seals and
// chains the nodes (each stack's epoch key derived once), then commits burns, the nodes with their
// payloads, head moves, drift and events together or not at all: no object store write and no
// network call on the way, in either mode. Each head move is conditional on the head
// the batch chained onto; when another writer (another process) moved it, or a sleeve was
// decommissioned or a balance spent meanwhile, a check fails and the statement is undone: a batch
// of several stacks is then committed stack by stack (one stack's conflict does not hold up the
// others), and a stack's batch is planned again from a fresh read. A refused write leaves nothing.

import type { Platform } from '../lib/platform.ts';
import { readStatement, runStatement, type StatementPart } from '../lib/db/statement.ts';
import { badRequest, conflict, insufficientTokens, notFound, unavailable } from '../lib/errors.ts';
import { eventsPart, type EventRecord } from '../lib/events.ts';
import { groupCommitter, type GroupCommitter, type KeyBatch, type Outcome } from '../lib/group-commit.ts';
import { inSpan } from '../lib/tracing.ts';
import { BalancesShort, balancesMilliRead, burnManyPart, fromMilli, sleeveAccount, type Move, type Token } from '../subgraphs/economy/index.ts';
import {
  checkText,
  hippocampusClient,
  indexNodesPart,
  isShadowWrite,
  newBranchId,
  sealNodeWith,
  shadowBranchesPart,
  writeEpoch,
  PERCEIVE_COST_MILLI,
  PERCEIVE_DRIFT_MILLI,
  PIN_COST_MILLI,
} from '../subgraphs/memory/index.ts';
import {
  requireActiveSleeve,
  requireSleeveOfStack,
  richestMemorySleeve,
  SleevesNotActive,
  sleeveWritesPart,
  spendFromSleeve,
  stackOfSleeve,
  writeRefusal,
  writeSleevesRead,
  type WriteSleeve,
} from '../subgraphs/sleeves/index.ts';
import { getStackRow, HeadMoved, headMovePart, stackEpochKey, writeStacksRead, type HeadMove, type WriteStack } from '../subgraphs/stacks/index.ts';

/** Writes hold the stack lock; under load they queue, so allow a generous wait. */
const TX = { maxWait: 30_000, timeout: 30_000 } as const;
/** Plans of one batch before it gives up with a 503 (each retry follows a concurrent change of the head, a sleeve or a balance). */
const BATCH_ATTEMPTS = 8;

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

const committers = new WeakMap<Platform, GroupCommitter<WriteInput, WriteResult>>();

/** A write joins its stack's queue; the stack is the one named, or the sleeve's. */
async function writeMemory(p: Platform, input: WriteInput): Promise<WriteResult> {
  const stackId = input.stackId ?? (await stackOfSleeve(p.db.prisma, input.sleeveId));
  let commit = committers.get(p);
  if (!commit) committers.set(p, (commit = groupCommitter((batch) => commitWrites(p, batch), { maxConcurrent: p.config.writeBatches })));
  return commit(stackId, input);
}

interface Planned {
  /** The write's stack group in the batch, and its place there. */
  g: number;
  at: number;
  stackId: string;
  input: WriteInput;
  sleeve: WriteSleeve;
  cid: string;
  data: string;
  links: string[];
  costs: Move[];
  branch: { id: string; baseCid: string | null } | null;
}

const retryable = (e: unknown) => e instanceof HeadMoved || e instanceof BalancesShort || e instanceof SleevesNotActive;

/** One batch of writes over one or more stacks (see the head of this file); outcomes per stack, per write. */
async function commitWrites(p: Platform, batch: ReadonlyArray<KeyBatch<WriteInput>>): Promise<Outcome<WriteResult>[][]> {
  for (let attempt = 1; ; attempt++) {
    const epoch = await writeEpoch(p);
    const outcomes: Outcome<WriteResult>[][] = batch.map((b) => new Array(b.items.length));
    const refuse = (g: number, at: number, error: unknown) => void (outcomes[g]![at] = { ok: false, error });
    // 1. One read statement, outside any lock: the stacks, the writers' sleeves and their balances.
    const ids = [...new Set(batch.flatMap((b) => b.items.map((w) => w.sleeveId)))];
    let read: { stacks: Map<string, WriteStack>; sleeves: Map<string, WriteSleeve>; held: Map<string, Record<Token, bigint>> };
    try {
      read = await readStatement(p.db, {
        stacks: writeStacksRead(batch.map((b) => b.key)),
        sleeves: writeSleevesRead(ids),
        held: balancesMilliRead(ids.map(sleeveAccount)),
      });
    } catch (error) {
      return batch.map((b) => b.items.map(() => ({ ok: false, error })));
    }
    const { stacks, sleeves, held } = read;
    const left = new Map<string, bigint>();
    const leftOf = (sleeveId: string, token: Token) => {
      const k = `${sleeveId}/${token}`;
      if (!left.has(k)) left.set(k, held.get(sleeveAccount(sleeveId))?.[token] ?? 0n);
      return left.get(k)!;
    };
    // 2. The plan, per stack in arrival order: who writes, each node chained onto the one before.
    const seen = new Map<string, string | null>();
    const planned: Planned[] = [];
    const moves: HeadMove[] = [];
    batch.forEach(({ key: stackId, items }, g) => {
      const stack = stacks.get(stackId);
      if (!stack) return items.forEach((_, at) => refuse(g, at, notFound('Stack', String(stackId))));
      let head = { episodicHead: stack.episodicHead, headSleeveId: stack.headSleeveId, headEpoch: stack.headEpoch };
      let key: Uint8Array | undefined;
      items.forEach((input, at) => {
        const sleeve = sleeves.get(input.sleeveId);
        if (!sleeve) return refuse(g, at, notFound('Sleeve', String(input.sleeveId)));
        const refusal = writeRefusal(sleeve);
        if (refusal) return refuse(g, at, refusal);
        try {
          requireSleeveOfStack(sleeve, stackId);
        } catch (e) {
          return refuse(g, at, e);
        }
        const costs: Move[] = [{ token: 'compute', milli: PERCEIVE_COST_MILLI }, ...(input.pin ? [{ token: 'memory' as const, milli: PIN_COST_MILLI }] : [])];
        for (const c of costs) {
          const have = leftOf(sleeve.id, c.token);
          if (have < c.milli) return refuse(g, at, insufficientTokens(c.token, fromMilli(c.milli), fromMilli(have)));
        }
        for (const c of costs) left.set(`${sleeve.id}/${c.token}`, leftOf(sleeve.id, c.token) - c.milli);
        key ??= stackEpochKey(p, stack, epoch);
        const node = sealNodeWith(key, stack.id, epoch, input.text, head.episodicHead);
        const writer = { sleeveId: sleeve.id, seenHead: seen.has(sleeve.id) ? seen.get(sleeve.id)! : sleeve.seenHead };
        const branch = isShadowWrite(head, writer, epoch) ? { id: newBranchId(), baseCid: writer.seenHead } : null;
        planned.push({ g, at, stackId, input, sleeve, ...node, costs, branch });
        head = { episodicHead: node.cid, headSleeveId: sleeve.id, headEpoch: epoch };
        seen.set(sleeve.id, node.cid);
      });
      if (head.episodicHead !== stack.episodicHead) moves.push({ stack, from: stack.episodicHead, to: head.episodicHead!, sleeveId: head.headSleeveId! });
    });
    if (!planned.length) return outcomes;
    const nodes = planned.map((w) => ({
      cid: w.cid,
      data: w.data,
      links: w.links,
      epoch,
      stackId: w.stackId,
      kind: w.input.kind,
      pinned: !!w.input.pin,
      sleeveId: w.sleeve.id,
    }));
    try {
      // 3. Head moves, burns, nodes with their payloads, branches, drift and events: one statement,
      // together or not at all. The head moves come first: their stack row locks order each
      // stack's writers.
      // The span is the write's transaction in a trace: its events carry it to the relay's publish.
      await inSpan('commit memory writes', { attributes: { 'cog.stacks': moves.length, 'cog.writes': planned.length } }, () =>
        runStatement(
          p.db,
          [
            headMovePart(moves, epoch),
            burnManyPart(
              planned.map((w) => ({ from: sleeveAccount(w.sleeve.id), moves: w.costs, reason: w.input.kind, ref: w.sleeve.id, epoch, stackId: w.stackId })),
            ),
            sleeveWritesPart(planned.map((w) => ({ sleeveId: w.sleeve.id, head: w.cid, driftMilli: PERCEIVE_DRIFT_MILLI }))),
            indexNodesPart(nodes),
            shadowBranchesPart(
              planned.flatMap((w) =>
                w.branch ? [{ id: w.branch.id, stackId: w.stackId, sleeveId: w.sleeve.id, baseCid: w.branch.baseCid, headCid: w.cid }] : [],
              ),
            ),
            eventsPart(planned.map((w) => writeEvent(w, epoch))),
          ].filter((x): x is StatementPart => !!x),
        ),
      );
    } catch (e) {
      // Several stacks: commit them one by one, so a stack another writer moved (or whose sleeve
      // or balance changed) is planned again alone and the others go through.
      if (retryable(e) && batch.length > 1) return Promise.all(batch.map((b) => commitWrites(p, [b]).then((o) => o[0]!)));
      if (retryable(e) && attempt < BATCH_ATTEMPTS) continue; // someone else moved first: plan again from a fresh read
      const error = retryable(e) ? unavailable(`stack ${batch[0]!.key}: writes kept meeting concurrent changes; retry`) : e;
      for (const w of planned) refuse(w.g, w.at, error);
      return outcomes;
    }
    for (const w of planned) {
      outcomes[w.g]![w.at] = {
        ok: true,
        value: { cid: w.cid, epoch, stackId: w.stackId, sleeveId: w.sleeve.id, embodimentType: w.sleeve.embodimentType, branchId: w.branch?.id ?? null },
      };
    }
    return outcomes;
  }
}

function writeEvent(w: Planned, epoch: number): EventRecord {
  const { stackId } = w;
  const perceive = w.input.kind === 'perceive';
  return {
    subject: perceive ? `cog.perceive.${stackId}` : `cog.memory.remembered.${stackId}`,
    type: perceive ? 'perceive' : 'memory.remembered',
    data: { stackId, sleeveId: w.sleeve.id, cid: w.cid, epoch, ...(perceive ? {} : { pinned: !!w.input.pin }) },
    msgId: `${w.input.kind}:${w.cid}`,
  };
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
