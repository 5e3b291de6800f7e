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
//
// The read is skipped when this process's own last commits left everything the batch needs (its
// stacks' heads, its sleeves, their balances: WriteStateCache below): the statement checks every
// one of those assumptions anyway, so a stale entry costs a retry from a fresh read, never a wrong
// write.

import type { Platform } from '../lib/platform.ts';
import { readStatement, runStatement, type StatementPart } from '../lib/db/statement.ts';
import { badRequest, conflict, insufficientTokens, notFound, unavailable } from '../lib/errors.ts';
import { eventsPart, type EventRecord } from '../lib/events.ts';
import { groupCommitter, type GroupCommitter, type KeyBatch, type Outcome } from '../lib/group-commit.ts';
import { inSpan } from '../lib/tracing.ts';
import { epochCurrentPart, newestStoredEpoch } from '../subgraphs/chains/index.ts';
import { BalancesShort, balancesMilliRead, burnManyPart, fromMilli, sleeveAccount, type Move, type Token } from '../subgraphs/economy/index.ts';
import {
  checkText,
  hippocampusClient,
  indexNodesPart,
  isShadowWrite,
  nodePinState,
  pinNodePart,
  pinStored,
  newBranchId,
  sealNodeWith,
  shadowBranchesPart,
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
  spendWithParts,
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

/** A batch stamped with an epoch older than a block the database holds (epochCurrentPart): stamped again. */
class EpochBehind extends Error {}

const retryable = (e: unknown) => e instanceof HeadMoved || e instanceof BalancesShort || e instanceof SleevesNotActive || e instanceof EpochBehind;

type WriteRead = { stacks: Map<string, WriteStack>; sleeves: Map<string, WriteSleeve>; held: Map<string, Record<Token, bigint>> };

/** Stacks whose state the cache holds at most (a write of one more drops the least recently written). */
const CACHED_STACKS = 8_192;
/** How long a stack whose cached plan failed is read fresh (another process or path writes it too). */
const DISTRUST_MS = 10_000;

/**
 * What this process's last commit of a stack left: the stack's head, its writers' sleeves (alive,
 * unfrozen, the head each saw) and their balances after the burns. A batch whose stacks, sleeves
 * and balances are all here plans from it and skips the read statement (one round trip of two per
 * batch). Never trusted: the write statement checks each thing a plan assumes (the head it chains
 * onto, each sleeve alive and unfrozen and still on the head it had seen, each balance enough), so
 * a stale entry makes the statement fail, and the batch is planned again from a fresh read as after
 * any concurrent change; the stacks concerned are then read fresh for DISTRUST_MS (another process
 * writes them too: two gateways). A plan from the cache that would refuse a write is redone from a
 * fresh read before anyone is refused (a grant elsewhere may have raised a balance), so refusals
 * come from the database as they are. The stack's wrapped master secret is immutable.
 */
class WriteStateCache {
  private stacks = new Map<string, { stack: WriteStack; sleeves: Set<string> }>();
  private sleeves = new Map<string, WriteSleeve>();
  private held = new Map<string, Record<Token, bigint>>();
  private distrusted = new Map<string, number>();

  /** Everything the batch reads, when the cache holds all of it. */
  get(batch: ReadonlyArray<KeyBatch<WriteInput>>): WriteRead | undefined {
    const out: WriteRead = { stacks: new Map(), sleeves: new Map(), held: new Map() };
    const now = Date.now();
    for (const { key, items } of batch) {
      const until = this.distrusted.get(key);
      if (until !== undefined) {
        if (until > now) return undefined;
        this.distrusted.delete(key);
      }
      const hit = this.stacks.get(key);
      if (!hit) return undefined;
      out.stacks.set(key, hit.stack);
      for (const { sleeveId } of items) {
        const sleeve = this.sleeves.get(sleeveId);
        const held = this.held.get(sleeveAccount(sleeveId));
        if (!sleeve || !held || !hit.sleeves.has(sleeveId)) return undefined;
        out.sleeves.set(sleeveId, sleeve);
        out.held.set(sleeveAccount(sleeveId), held);
      }
    }
    return out;
  }

  /** After a commit: the stacks it moved, as it left them; the stacks it did not move are forgotten. */
  committed(
    batch: ReadonlyArray<KeyBatch<WriteInput>>,
    moved: Map<string, WriteStack>,
    sleeves: Map<string, WriteSleeve>,
    held: Map<string, Record<Token, bigint>>,
  ) {
    for (const { key } of batch) {
      const stack = moved.get(key);
      if (!stack) {
        this.forget(key);
        continue;
      }
      const prior = this.stacks.get(key);
      this.stacks.delete(key); // re-inserted last: the Map's order is the recency order
      const mine = prior?.sleeves ?? new Set<string>();
      this.stacks.set(key, { stack, sleeves: mine });
      for (const [id, sleeve] of sleeves) {
        if (sleeve.stackId !== key) continue;
        mine.add(id);
        this.sleeves.set(id, sleeve);
        const h = held.get(sleeveAccount(id));
        if (h) this.held.set(sleeveAccount(id), h);
      }
    }
    while (this.stacks.size > CACHED_STACKS) this.forget(this.stacks.keys().next().value as string);
  }

  /** A plan from the cache failed on these stacks: forget them, and read them fresh for a while. */
  distrust(keys: readonly string[]) {
    const until = Date.now() + DISTRUST_MS;
    for (const k of keys) {
      this.forget(k);
      this.distrusted.set(k, until);
    }
    if (this.distrusted.size > CACHED_STACKS) {
      const now = Date.now();
      for (const [k, t] of this.distrusted) if (t <= now) this.distrusted.delete(k);
    }
  }

  private forget(key: string) {
    const hit = this.stacks.get(key);
    if (!hit) return;
    this.stacks.delete(key);
    for (const id of hit.sleeves) {
      this.sleeves.delete(id);
      this.held.delete(sleeveAccount(id));
    }
  }
}

const writeCaches = new WeakMap<Platform, WriteStateCache>();
function writeCacheOf(p: Platform): WriteStateCache {
  let c = writeCaches.get(p);
  if (!c) writeCaches.set(p, (c = new WriteStateCache()));
  return c;
}

/** One batch of writes over one or more stacks (see the head of this file); outcomes per stack, per write. */
async function commitWrites(p: Platform, batch: ReadonlyArray<KeyBatch<WriteInput>>): Promise<Outcome<WriteResult>[][]> {
  const cache = writeCacheOf(p);
  const keys = batch.map((b) => b.key);
  for (let attempt = 1; ; attempt++) {
    // Out of Medulla's process the bus may not have announced the newest block here yet: the
    // statement checks it (epochCurrentPart), and a batch behind is stamped again below.
    const epoch = p.epochs.current();
    const outcomes: Outcome<WriteResult>[][] = batch.map((b) => new Array(b.items.length));
    let refused = false;
    const refuse = (g: number, at: number, error: unknown) => {
      refused = true;
      outcomes[g]![at] = { ok: false, error };
    };
    // 1. One read statement, outside any lock: the stacks, the writers' sleeves and their balances;
    // or, on the first attempt, what this process's last commits of these stacks left.
    const ids = [...new Set(batch.flatMap((b) => b.items.map((w) => w.sleeveId)))];
    const cached = attempt === 1 ? cache.get(batch) : undefined;
    let read: WriteRead;
    try {
      read =
        cached ??
        (await readStatement(p.db, {
          stacks: writeStacksRead(keys),
          sleeves: writeSleevesRead(ids),
          held: balancesMilliRead(ids.map(sleeveAccount)),
        }));
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
    // A refusal is the database's to make: a plan from the cache that refuses is made again from a read.
    if (cached && refused) continue;
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
            p.epochs.authoritative ? null : epochCurrentPart(epoch, () => new EpochBehind()),
            headMovePart(moves, epoch),
            burnManyPart(
              planned.map((w) => ({ from: sleeveAccount(w.sleeve.id), moves: w.costs, reason: w.input.kind, ref: w.sleeve.id, epoch, stackId: w.stackId })),
            ),
            sleeveWritesPart(planned.map((w) => ({ sleeveId: w.sleeve.id, head: w.cid, driftMilli: PERCEIVE_DRIFT_MILLI, seenHead: w.sleeve.seenHead }))),
            indexNodesPart(nodes),
            shadowBranchesPart(
              planned.flatMap((w) =>
                w.branch ? [{ id: w.branch.id, stackId: w.stackId, sleeveId: w.sleeve.id, baseCid: w.branch.baseCid, headCid: w.cid }] : [],
              ),
            ),
            // Handed to this process's relay, on PGlite too since session 40: the relay's reads of
            // the table were a twentieth of the embedded mixed load's main thread (docs/decisions.md,
            // "The write path hands its events").
            eventsPart(
              planned.map((w) => writeEvent(w, epoch)),
              { handTo: p.db },
            ),
          ].filter((x): x is StatementPart => !!x),
        ),
      );
    } catch (e) {
      if (e instanceof EpochBehind) {
        // Stamped again with the newest block the database holds, from a fresh read.
        const newest = await newestStoredEpoch(p.db).catch(() => null);
        if (newest) p.epochs.observe(newest);
        if (attempt < BATCH_ATTEMPTS) continue;
      }
      if (cached && retryable(e) && !(e instanceof EpochBehind)) cache.distrust(keys);
      // Several stacks: commit them one by one, so a stack another writer moved (or whose sleeve
      // or balance changed) is planned again alone and the others go through.
      if (retryable(e) && batch.length > 1) return Promise.all(batch.map((b) => commitWrites(p, [b]).then((o) => o[0]!)));
      if (retryable(e) && attempt < BATCH_ATTEMPTS) continue; // someone else moved first: plan again from a fresh read
      const error = retryable(e) ? unavailable(`stack ${batch[0]!.key}: writes kept meeting concurrent changes; retry`) : e;
      for (const w of planned) refuse(w.g, w.at, error);
      return outcomes;
    }
    // What the commit left, for the next batch of these stacks.
    const moved = new Map(
      moves.map((m) => [m.stack.id, { ...stacks.get(m.stack.id)!, episodicHead: m.to, headSleeveId: m.sleeveId, headEpoch: epoch } satisfies WriteStack]),
    );
    const after = new Map<string, WriteSleeve>();
    const heldAfter = new Map<string, Record<Token, bigint>>();
    for (const w of planned) {
      after.set(w.sleeve.id, { ...w.sleeve, seenHead: w.cid });
      const account = sleeveAccount(w.sleeve.id);
      if (heldAfter.has(account)) continue;
      const h = { ...(held.get(account) ?? ({} as Record<Token, bigint>)) };
      for (const t of Object.keys(h) as Token[]) if (left.has(`${w.sleeve.id}/${t}`)) h[t] = left.get(`${w.sleeve.id}/${t}`)!;
      heldAfter.set(account, h);
    }
    cache.committed(batch, moved, after, heldAfter);
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
  // Onto the write's own result (made for this caller): `{ ...r, thought, cost }` copies r and then
  // adds members the copy's shape lacks, a slow path of V8 (1.3 µs a perceive; docs/decisions.md).
  return Object.assign(r, { thought: `${r.embodimentType}@${r.sleeveId.slice(-6)} ${text}`, cost: { compute: Number(PERCEIVE_COST_MILLI) / 1000 } });
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

/** The node was pinned (or pruned) between the pin's read and its statement: read again. */
class PinRaced extends Error {}

/**
 * Pins a node for a sleeve of its stack: 1 memory token (none when already pinned). The sleeve and
 * the node are read first (no lock), then the spend and the pin are one statement (sleeves'
 * spendWithParts with memory's pinNodePart): no interactive transaction holding PGlite's one
 * connection, and no network call while the stack's row is locked (the pin went to the
 * Hippocampus's HTTP API inside the transaction in distributed mode). The interactive transaction
 * is kept for a spend that declined (its refusal, 402 or 409, said precisely). A node whose payload
 * is in a Hippocampus node's store (PUT through its API) is pinned there again after the commit, so
 * that node pushes it to its peers now (its anti-entropy would pull it within an epoch otherwise).
 */
export async function pinNode(p: Platform, cid: string, payer: string): Promise<{ cid: string; pinned: true; cost: { memory: number } }> {
  const epoch = p.epochs.current();
  const cost = { token: 'memory' as const, milli: PIN_COST_MILLI };
  const meta = { reason: 'pin', ref: cid, epoch };
  const pinned = (charged: boolean, inRow: boolean) => {
    if (charged && !inRow) {
      hippocampusClient(p)
        .pin(cid)
        .catch((e) => p.log.warn({ cid, err: (e as Error).message }, 'pin: the Hippocampus did not take the replication push (its anti-entropy will)'));
    }
    return { cid, pinned: true as const, cost: { memory: charged ? Number(PIN_COST_MILLI) / 1000 : 0 } };
  };
  for (let attempt = 1; attempt <= 5; attempt++) {
    const [sleeve, node] = await Promise.all([requireActiveSleeve(p.db.prisma, payer), nodePinState(p.db.prisma, cid)]);
    if (!node) throw notFound('Memory node', cid);
    requireSleeveOfStack(sleeve, node.stackId);
    if (node.pinned) return pinned(false, node.inRow);
    try {
      if (await spendWithParts(p.db, sleeve, cost, meta, [pinNodePart(cid, node.stackId, () => new PinRaced())])) return pinned(true, node.inRow);
    } catch (e) {
      if (e instanceof PinRaced) continue;
      throw e;
    }
    // Declined (the balance short, the sleeve frozen or decommissioned meanwhile): the same rules
    // in a transaction, for the precise refusal; every read and write in it is this database's.
    // Its answer: whether the node's payload is in its row once it charged, null when it found the node pinned.
    const inRow = await p.db.prisma.$transaction(async (tx) => {
      const s = await requireActiveSleeve(tx, payer);
      const n = await nodePinState(tx, cid);
      if (!n) throw notFound('Memory node', cid);
      requireSleeveOfStack(s, n.stackId);
      if (n.pinned) return null;
      await spendFromSleeve(tx, s, [cost], meta);
      await pinStored(tx, cid);
      return n.inRow;
    }, TX);
    return inRow === null ? pinned(false, true) : pinned(true, inRow);
  }
  throw conflict(`memory node ${cid} changed during the pin; try again`, 'PIN_RACED');
}
