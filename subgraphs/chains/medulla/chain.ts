// One Medulla node's view of the chain: every block it knows (persisted in MedullaBlock under its
// node id), the main chain (most cumulative work; first seen wins a tie), the Synaptic Field over
// the main chain's last 256 hashes, and the coherence tuples waiting to be committed.
//
// Memory holds a window: every stored block from MEMORY_WINDOW below the tip up (what validation,
// mining and short reorgs read); older blocks are read from the database when asked for (RPC reads,
// a fork below the window). A restart reads the window, not the chain's whole history, so neither
// its time nor the heap grows with the chain's age.
//
// Committing tuples: a block carries at most one tuple. The next block takes the pending tuple of
// the lowest epoch <= its height that the main chain does not carry yet (so a tuple for a future
// epoch waits for the block of that epoch, and one whose block is past goes into the next block).
// Tuples older than 256 epochs behind the tip are no longer committed.
import type { Db, Tx } from '../../../lib/db/index.ts';
import { recordEvent, recordEventOnce } from '../../../lib/events.ts';
import { SynapticField, SYNAPTIC_WINDOW } from '../../../lib/mmr.ts';
import { openResidue } from '../residue-port.ts';
import { openForeignTuple } from '../foreign-tuple.ts';
import { ZERO_ROOT, type CoherenceTuple } from '../thalamus/coherence.ts';
import { blockJson, toBlock, ZERO_HASH, type Block, type BlockHeader } from './header.ts';
import { nextDifficulty, RETARGET_WINDOW } from './retarget.ts';
import { validateBlock, type ChainView } from './validate.ts';

/** PGlite on a busy 2-core machine can exceed Prisma's 5 s default. */
const TX_OPTS = { timeout: 20_000, maxWait: 20_000 };

/** Fixed genesis time (2026-01-01T00:00:00Z): every node with the same difficulty has one genesis. */
export const GENESIS_TS_MS = Date.UTC(2026, 0, 1);
export const TUPLE_HORIZON = SYNAPTIC_WINDOW;
/** Blocks kept in memory below the tip (an hour at 4 s epochs): far more than validation's 256. */
export const MEMORY_WINDOW = 1024;
/**
 * Tuples kept (and read at a restart) from this far below the tip. A tuple below the tip's own
 * horizon can only become committable again if a reorg lowers the tip; twice the horizon covers
 * that without keeping every tuple ever submitted.
 */
const TUPLE_KEEP = 2 * TUPLE_HORIZON;

export interface StoredBlock extends Block {
  work: bigint;
}

export interface ChainOptions {
  node: string;
  intervalMs: number;
  genesisDifficulty: number;
  residueExpiryEpochs: number;
  /** Blocks kept in memory below the tip (tests make it small); at least the field's 256. */
  memoryWindow?: number;
}

export interface AcceptResult {
  status: 'known' | 'extended' | 'reorg' | 'side';
  block: Block;
  detached: Block[];
  attached: Block[];
}

export function genesisBlock(difficulty: number): Block {
  return toBlock({
    prevHash: ZERO_HASH,
    height: 0,
    epoch: 0,
    difficulty,
    tsMs: GENESIS_TS_MS,
    crossRoot: ZERO_ROOT,
    evmRoot: ZERO_ROOT,
    ipfsRoot: ZERO_ROOT,
    sleevesRoot: ZERO_ROOT,
    coherenceEpoch: null,
    synapticFieldRoot: new SynapticField().rootHex(),
    nonce: 0,
  });
}

type Row = Awaited<ReturnType<Db['medullaBlock']['findFirstOrThrow']>>;

function fromRow(r: Row): StoredBlock {
  return {
    blockHash: r.hash,
    prevHash: r.prevHash,
    height: r.height,
    epoch: r.epoch,
    difficulty: r.difficulty,
    ts: r.ts,
    tsMs: Number(r.tsMs),
    nonce: Number(r.nonce),
    crossRoot: r.crossRoot,
    evmRoot: r.evmRoot,
    ipfsRoot: r.ipfsRoot,
    sleevesRoot: r.sleevesRoot,
    coherenceEpoch: r.coherenceEpoch,
    synapticFieldRoot: r.synapticFieldRoot,
    work: BigInt(r.work),
  };
}

function toRow(node: string, b: StoredBlock, onMain: boolean) {
  return {
    node,
    hash: b.blockHash,
    height: b.height,
    prevHash: b.prevHash,
    epoch: b.epoch,
    difficulty: b.difficulty,
    ts: b.ts,
    tsMs: BigInt(b.tsMs),
    nonce: String(b.nonce),
    crossRoot: b.crossRoot,
    evmRoot: b.evmRoot,
    ipfsRoot: b.ipfsRoot,
    sleevesRoot: b.sleevesRoot,
    coherenceEpoch: b.coherenceEpoch,
    synapticFieldRoot: b.synapticFieldRoot,
    work: b.work.toString(),
    onMain,
  };
}

export class Chain implements ChainView {
  /** Every stored block at height >= #base (main and side). */
  #blocks = new Map<string, StoredBlock>();
  /** Lowest height held in memory. */
  #base = 0;
  /** Main-chain hashes from #base up: #main[i] is the block at height #base + i. */
  #main: string[] = [];
  #field = new SynapticField();
  /** coherenceEpoch -> hash of the main-chain block carrying it (main blocks in memory). */
  #committed = new Map<number, string>();
  /** First tuple submitted to this node per epoch (from TUPLE_KEEP below the tip). */
  #tuples = new Map<number, CoherenceTuple>();
  #attachedOnce = new Set<string>();
  #lock: Promise<unknown> = Promise.resolve();
  readonly #window: number;

  private constructor(
    private readonly db: Db,
    readonly opts: ChainOptions,
  ) {
    // The Synaptic Field and the tuples a block may still commit (TUPLE_HORIZON = the field's 256)
    // are read from the main chain in memory: the window holds at least that much.
    this.#window = Math.max(SYNAPTIC_WINDOW, opts.memoryWindow ?? MEMORY_WINDOW);
  }

  /** Loads the window below the stored tip (a restart resumes from it) or writes genesis. */
  static async open(db: Db, opts: ChainOptions): Promise<Chain> {
    const c = new Chain(db, opts);
    const top = await db.medullaBlock.findFirst({ where: { node: opts.node, onMain: true }, orderBy: { height: 'desc' }, select: { height: true } });
    if (!top) {
      const g: StoredBlock = { ...genesisBlock(opts.genesisDifficulty), work: BigInt(opts.genesisDifficulty) };
      await db.medullaBlock.create({ data: toRow(opts.node, g, true) });
    }
    const tipHeight = top?.height ?? 0;
    c.#base = Math.max(0, tipHeight - c.#window);
    const rows = await db.medullaBlock.findMany({ where: { node: opts.node, height: { gte: c.#base } }, orderBy: { height: 'asc' } });
    c.#hold(rows);
    c.#rebuildMainIndexes();
    // Pending tuples: those submitted to this node, and those of blocks a reorg detached (a peer's
    // block may carry a tuple this node was never sent), in the order they arrived; the first per
    // epoch wins, as in memory.
    const from = Math.max(0, tipHeight - TUPLE_KEEP);
    const subs = await db.coherenceSubmission.findMany({ where: { node: opts.node, epoch: { gte: from } }, orderBy: { id: 'asc' } });
    const detached = await db.medullaBlock.findMany({
      where: { node: opts.node, onMain: false, detachedAt: { not: null }, coherenceEpoch: { gte: from } },
      orderBy: { detachedAt: 'asc' },
    });
    const arrivals = [
      ...subs.map((s) => ({
        at: s.createdAt.getTime(),
        t: { epoch: s.epoch, crossRoot: s.crossRoot, evmRoot: s.evmRoot, ipfsRoot: s.ipfsRoot, sleevesRoot: s.sleevesRoot },
      })),
      ...detached.map((d) => ({
        at: d.detachedAt!.getTime(),
        t: { epoch: d.coherenceEpoch!, crossRoot: d.crossRoot, evmRoot: d.evmRoot, ipfsRoot: d.ipfsRoot, sleevesRoot: d.sleevesRoot },
      })),
    ];
    arrivals.sort((x, y) => x.at - y.at); // stable: on a tie the submission (listed first) wins
    for (const { t } of arrivals) c.addTuple(t);
    return c;
  }

  /** Puts stored rows (heights >= #base, oldest first) into memory. */
  #hold(rows: Row[]) {
    for (const r of rows) {
      const b = fromRow(r);
      this.#blocks.set(b.blockHash, b);
      if (r.onMain) this.#main[b.height - this.#base] = b.blockHash;
    }
  }

  /** Lowers the window to `height`: a fork below it, or validation reaching under it, reads there. */
  async #extendDown(height: number) {
    if (height >= this.#base) return;
    const rows = await this.db.medullaBlock.findMany({
      where: { node: this.opts.node, height: { gte: height, lt: this.#base } },
      orderBy: { height: 'asc' },
    });
    this.#main = [...new Array<string>(this.#base - height), ...this.#main];
    this.#base = height;
    this.#hold(rows);
  }

  /** Trims the window back below the tip once it is a quarter over (a prune per that many blocks). */
  #prune() {
    const tip = this.tip().height;
    if (tip - this.#base <= this.#window + Math.ceil(this.#window / 4)) return;
    const base = tip - this.#window;
    this.#main = this.#main.slice(base - this.#base);
    this.#base = base;
    for (const [hash, b] of this.#blocks) {
      if (b.height >= base) continue;
      this.#blocks.delete(hash);
      this.#attachedOnce.delete(hash);
    }
    for (const [epoch, hash] of this.#committed) if (!this.#blocks.has(hash)) this.#committed.delete(epoch);
    for (const epoch of this.#tuples.keys()) if (epoch < tip - TUPLE_KEEP) this.#tuples.delete(epoch);
  }

  /** What memory holds: the lowest height and the number of blocks (main and side). */
  held(): { from: number; blocks: number } {
    return { from: this.#base, blocks: this.#blocks.size };
  }

  #mainAt(height: number): string | undefined {
    return height >= this.#base ? this.#main[height - this.#base] : undefined;
  }

  #rebuildMainIndexes() {
    this.#committed.clear();
    for (const h of this.#main) {
      const b = this.#blocks.get(h)!;
      if (b.coherenceEpoch !== null) this.#committed.set(b.coherenceEpoch, h);
    }
    this.#field = SynapticField.fromLeaves(this.#main.slice(-SYNAPTIC_WINDOW));
  }

  /** Runs fn after every earlier call has finished (blocks join one at a time). */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  tip(): StoredBlock {
    return this.#blocks.get(this.#main[this.#main.length - 1])!;
  }

  info() {
    const t = this.tip();
    return { difficulty: t.difficulty, epoch: t.epoch, height: t.height, tip: t.blockHash };
  }

  /** A block held in memory (the window below the tip): what validation reads. */
  get(hash: string): StoredBlock | undefined {
    return this.#blocks.get(hash);
  }

  /** Any block this node stores, from memory or, below the window, the database. */
  async block(hash: string): Promise<StoredBlock | undefined> {
    const held = this.#blocks.get(hash);
    if (held) return held;
    const r = await this.db.medullaBlock.findUnique({ where: { node_hash: { node: this.opts.node, hash } } });
    return r ? fromRow(r) : undefined;
  }

  /** Whether this node stores the block; `height`, when known, spares the read above the window. */
  async has(hash: string, height?: number): Promise<boolean> {
    if (this.#blocks.has(hash)) return true;
    if (height !== undefined && height >= this.#base) return false;
    return (await this.db.medullaBlock.count({ where: { node: this.opts.node, hash } })) > 0;
  }

  /** The main-chain block at `height`. */
  async atHeight(height: number): Promise<StoredBlock | undefined> {
    const h = this.#mainAt(height);
    if (h) return this.#blocks.get(h);
    if (height >= this.#base) return undefined;
    const r = await this.db.medullaBlock.findFirst({ where: { node: this.opts.node, height, onMain: true } });
    return r ? fromRow(r) : undefined;
  }

  ancestors(hash: string, n: number): StoredBlock[] {
    const out: StoredBlock[] = [];
    let b = this.#blocks.get(hash);
    while (b && out.length < n) {
      out.push(b);
      b = b.height === 0 ? undefined : this.#blocks.get(b.prevHash);
    }
    return out.reverse();
  }

  fieldRootAfter(hash: string): string {
    if (hash === this.#main[this.#main.length - 1]) return this.#field.rootHex();
    return SynapticField.fromLeaves(this.ancestors(hash, SYNAPTIC_WINDOW).map((b) => b.blockHash)).rootHex();
  }

  /** The Synaptic Field committed by the main-chain block at `height` (the 256 hashes before it). */
  async fieldCommittedAt(height: number): Promise<SynapticField> {
    const from = Math.max(0, height - SYNAPTIC_WINDOW);
    return SynapticField.fromLeaves((await this.range(from, height - from)).map((b) => b.blockHash));
  }

  /** Difficulty the next block on the tip must carry. */
  nextDifficulty(): number {
    return nextDifficulty(this.ancestors(this.tip().blockHash, RETARGET_WINDOW + 1), this.opts.intervalMs);
  }

  /** Tuple the next block commits, if any. */
  pendingTuple(): CoherenceTuple | undefined {
    const h = this.tip().height + 1;
    let best: CoherenceTuple | undefined;
    for (const t of this.#tuples.values()) {
      if (t.epoch > h || t.epoch < h - TUPLE_HORIZON || this.#committed.has(t.epoch)) continue;
      if (!best || t.epoch < best.epoch) best = t;
    }
    return best;
  }

  /** The main-chain block carrying the tuple of `epoch`, if any. */
  async committedBlock(epoch: number): Promise<StoredBlock | undefined> {
    const h = this.#committed.get(epoch);
    if (h) return this.#blocks.get(h);
    // A block carries a tuple of its own epoch or an earlier one: from the window up, memory knows.
    if (epoch >= this.#base) return undefined;
    const r = await this.db.medullaBlock.findFirst({ where: { node: this.opts.node, onMain: true, coherenceEpoch: epoch, height: { gte: epoch } } });
    return r ? fromRow(r) : undefined;
  }

  hasTuple(epoch: number): boolean {
    return this.#tuples.has(epoch);
  }

  /** Remembers the first tuple submitted for an epoch (the caller persisted it). */
  addTuple(t: CoherenceTuple): void {
    if (!this.#tuples.has(t.epoch)) this.#tuples.set(t.epoch, t);
  }

  /** Header of the next block on the tip, nonce 0 and tsMs the lower bound (the miner refreshes it). */
  template(): BlockHeader {
    const tip = this.tip();
    const t = this.pendingTuple();
    return {
      prevHash: tip.blockHash,
      height: tip.height + 1,
      epoch: tip.height + 1,
      difficulty: this.nextDifficulty(),
      tsMs: Math.max(Date.now(), tip.tsMs),
      crossRoot: t?.crossRoot ?? ZERO_ROOT,
      evmRoot: t?.evmRoot ?? ZERO_ROOT,
      ipfsRoot: t?.ipfsRoot ?? ZERO_ROOT,
      sleevesRoot: t?.sleevesRoot ?? ZERO_ROOT,
      coherenceEpoch: t ? t.epoch : null,
      synapticFieldRoot: this.#field.rootHex(),
      nonce: 0,
    };
  }

  /** Validates and stores a block; moves the main chain when it carries more work. Serialised. */
  accept(block: Block): Promise<AcceptResult> {
    return this.serial(() => this.#accept(block));
  }

  async #accept(block: Block): Promise<AcceptResult> {
    if (await this.has(block.blockHash, block.height)) return { status: 'known', block, detached: [], attached: [] };
    // Validation reads the parent's 256 ancestors: a block forking below the window reads them in.
    await this.#extendDown(Math.max(0, block.height - 1 - SYNAPTIC_WINDOW));
    validateBlock(block, this, { intervalMs: this.opts.intervalMs });
    const parent = this.#blocks.get(block.prevHash)!;
    const stored: StoredBlock = { ...block, work: parent.work + BigInt(block.difficulty) };
    const tip = this.tip();
    if (stored.work <= tip.work) {
      await this.db.medullaBlock.create({ data: toRow(this.opts.node, stored, false) });
      this.#blocks.set(stored.blockHash, stored);
      return { status: 'side', block, detached: [], attached: [] };
    }
    // Branch from the fork point (exclusive) up to the new block, and the main blocks it replaces.
    const attached: StoredBlock[] = [stored];
    let b = parent;
    while (this.#mainAt(b.height) !== b.blockHash) {
      attached.unshift(b);
      if (b.height - 1 < this.#base) await this.#extendDown(Math.max(0, b.height - 1 - this.#window));
      b = this.#blocks.get(b.prevHash)!;
    }
    const forkHeight = b.height;
    const detached = this.#main.slice(forkHeight + 1 - this.#base).map((h) => this.#blocks.get(h)!);
    await this.db.$transaction(async (tx) => {
      await tx.medullaBlock.create({ data: toRow(this.opts.node, stored, false) });
      if (detached.length) {
        // detachedAt persists the re-submission below: a restart mid-reorg still commits the tuple.
        await tx.medullaBlock.updateMany({
          where: { node: this.opts.node, hash: { in: detached.map((d) => d.blockHash) } },
          data: { onMain: false, detachedAt: new Date() },
        });
      }
      await tx.medullaBlock.updateMany({ where: { node: this.opts.node, hash: { in: attached.map((a) => a.blockHash) } }, data: { onMain: true } });
      if (detached.length) await this.#onDetach(tx, detached, forkHeight, stored);
      for (const a of attached) await this.#onAttach(tx, a);
    }, TX_OPTS);
    this.#blocks.set(stored.blockHash, stored);
    this.#main.length = forkHeight + 1 - this.#base;
    for (const a of attached) this.#main[a.height - this.#base] = a.blockHash;
    if (detached.length) {
      // A heavier but shorter branch may leave fewer than the field's 256 hashes in the window.
      await this.#extendDown(Math.max(0, stored.height - SYNAPTIC_WINDOW));
      this.#rebuildMainIndexes();
      // Re-submit: a detached tuple is pending again and goes into the next block on the new tip.
      for (const d of detached) {
        if (d.coherenceEpoch !== null)
          this.addTuple({ epoch: d.coherenceEpoch, crossRoot: d.crossRoot, evmRoot: d.evmRoot, ipfsRoot: d.ipfsRoot, sleevesRoot: d.sleevesRoot });
      }
    } else {
      this.#field.append(stored.blockHash);
      if (stored.coherenceEpoch !== null) this.#committed.set(stored.coherenceEpoch, stored.blockHash);
    }
    for (const a of attached) this.#attachedOnce.add(a.blockHash);
    this.#prune();
    return { status: detached.length ? 'reorg' : 'extended', block, detached, attached };
  }

  /**
   * A block's events carry one message id whichever node attaches it (the first node's copy is the
   * one published); a block this node attaches again after a reorg is announced again.
   */
  async #announce(tx: Tx, ev: { subject: string; type: string; data: Record<string, unknown> }, base: string, hash: string) {
    if (this.#attachedOnce.has(hash)) await recordEvent(tx, { ...ev, msgId: `${base}:${Date.now()}` });
    else await recordEventOnce(tx, { ...ev, msgId: base });
  }

  async #onAttach(tx: Tx, b: StoredBlock) {
    const node = this.opts.node;
    const key = `${b.height}:${b.blockHash}`;
    const info = { epoch: b.epoch, height: b.height, tip: b.blockHash };
    await this.#announce(tx, { subject: 'cog.epoch.advanced', type: 'epoch.advanced', data: { ...info, node } }, `epoch:${key}`, b.blockHash);
    await this.#announce(tx, { subject: 'cog.block.mined', type: 'block.mined', data: { block: blockJson(b), node } }, `block:${key}`, b.blockHash);
    if (b.coherenceEpoch !== null) {
      const folded = await tx.epochAnchor.findUnique({ where: { epoch: b.coherenceEpoch } });
      if (folded?.crossRoot === b.crossRoot) {
        await tx.epochAnchor.update({ where: { epoch: b.coherenceEpoch }, data: { blockHash: b.blockHash, blockHeight: b.height } });
      } else if (folded) {
        await openForeignTuple(
          tx,
          {
            epoch: b.coherenceEpoch,
            committed: { crossRoot: b.crossRoot, blockHash: b.blockHash, height: b.height, node },
            folded: { crossRoot: folded.crossRoot, operator: folded.operator },
          },
          b.height,
          this.opts.residueExpiryEpochs,
        );
      }
      await this.#announce(
        tx,
        {
          subject: 'cog.anchor.committed',
          type: 'anchor.committed',
          data: { epoch: b.coherenceEpoch, crossRoot: b.crossRoot, blockHash: b.blockHash, height: b.height, node },
        },
        `anchor:${key}`,
        b.blockHash,
      );
    }
  }

  /** A detached block that carried a tuple (an EpochAnchor) opens a reorg-orphan residue. */
  async #onDetach(tx: Tx, detached: StoredBlock[], forkHeight: number, newTip: StoredBlock) {
    const node = this.opts.node;
    await recordEvent(tx, {
      subject: 'cog.medulla.reorg',
      type: 'medulla.reorg',
      data: { node, forkHeight, oldTip: detached[detached.length - 1].blockHash, newTip: newTip.blockHash, detached: detached.map((d) => d.blockHash) },
    });
    for (const d of detached) {
      if (d.coherenceEpoch === null) continue;
      await tx.epochAnchor.updateMany({ where: { epoch: d.coherenceEpoch, blockHash: d.blockHash }, data: { blockHash: null, blockHeight: null } });
      await openResidue(tx, {
        kind: 'reorg-orphan',
        trigger: `Medulla reorg at height ${forkHeight + 1} detached block ${d.blockHash} carrying the anchor of epoch ${d.coherenceEpoch}`,
        epoch: newTip.height,
        evidence: {
          node,
          detachedHash: d.blockHash,
          detachedHeight: d.height,
          coherenceEpoch: d.coherenceEpoch,
          crossRoot: d.crossRoot,
          forkHeight,
          newTip: newTip.blockHash,
        },
        dedupeKey: `reorg-orphan:${d.blockHash}`,
        expiryEpochs: this.opts.residueExpiryEpochs,
      });
    }
  }

  /** Main-chain blocks from `from`, at most `count`: below the window from the database. */
  async range(from: number, count: number): Promise<StoredBlock[]> {
    const end = from + count;
    const held = this.#main.slice(Math.max(from, this.#base) - this.#base, Math.max(end, this.#base) - this.#base).map((h) => this.#blocks.get(h)!);
    if (from >= this.#base) return held;
    const rows = await this.db.medullaBlock.findMany({
      where: { node: this.opts.node, onMain: true, height: { gte: from, lt: Math.min(end, this.#base) } },
      orderBy: { height: 'asc' },
    });
    return [...rows.map(fromRow), ...held];
  }
}
