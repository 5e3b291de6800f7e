// One Medulla node's view of the chain: every block it knows (persisted in MedullaBlock under its
// node id), the main chain (most cumulative work; first seen wins a tie), the Synaptic Field over
// the main chain's last 256 hashes, and the coherence tuples waiting to be committed.
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

export interface StoredBlock extends Block {
  work: bigint;
}

export interface ChainOptions {
  node: string;
  intervalMs: number;
  genesisDifficulty: number;
  residueExpiryEpochs: number;
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
  #blocks = new Map<string, StoredBlock>();
  #main: string[] = [];
  #field = new SynapticField();
  /** coherenceEpoch -> hash of the main-chain block carrying it. */
  #committed = new Map<number, string>();
  /** First tuple submitted to this node per epoch. */
  #tuples = new Map<number, CoherenceTuple>();
  #attachedOnce = new Set<string>();
  #lock: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly db: Db,
    readonly opts: ChainOptions,
  ) {}

  /** Loads the node's blocks (a restart resumes from the stored tip) or writes genesis. */
  static async open(db: Db, opts: ChainOptions): Promise<Chain> {
    const c = new Chain(db, opts);
    const rows = await db.medullaBlock.findMany({ where: { node: opts.node }, orderBy: { height: 'asc' } });
    if (!rows.length) {
      const g: StoredBlock = { ...genesisBlock(opts.genesisDifficulty), work: BigInt(opts.genesisDifficulty) };
      await db.medullaBlock.create({ data: toRow(opts.node, g, true) });
      rows.push(await db.medullaBlock.findFirstOrThrow({ where: { node: opts.node } }));
    }
    for (const r of rows) {
      const b = fromRow(r);
      c.#blocks.set(b.blockHash, b);
      if (r.onMain) c.#main[b.height] = b.blockHash;
    }
    c.#rebuildMainIndexes();
    // Pending tuples: those submitted to this node, and those of blocks a reorg detached (a peer's
    // block may carry a tuple this node was never sent), in the order they arrived; the first per
    // epoch wins, as in memory.
    const subs = await db.coherenceSubmission.findMany({ where: { node: opts.node }, orderBy: { id: 'asc' } });
    const detached = await db.medullaBlock.findMany({
      where: { node: opts.node, onMain: false, detachedAt: { not: null }, coherenceEpoch: { not: null } },
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

  get(hash: string): StoredBlock | undefined {
    return this.#blocks.get(hash);
  }

  atHeight(height: number): StoredBlock | undefined {
    const h = this.#main[height];
    return h ? this.#blocks.get(h) : undefined;
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
  fieldCommittedAt(height: number): SynapticField {
    return SynapticField.fromLeaves(this.#main.slice(Math.max(0, height - SYNAPTIC_WINDOW), height));
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

  committedBlock(epoch: number): StoredBlock | undefined {
    const h = this.#committed.get(epoch);
    return h ? this.#blocks.get(h) : undefined;
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
    if (this.#blocks.has(block.blockHash)) return { status: 'known', block, detached: [], attached: [] };
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
    while (this.#main[b.height] !== b.blockHash) {
      attached.unshift(b);
      b = this.#blocks.get(b.prevHash)!;
    }
    const forkHeight = b.height;
    const detached = this.#main.slice(forkHeight + 1).map((h) => this.#blocks.get(h)!);
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
    this.#main.length = forkHeight + 1;
    for (const a of attached) this.#main[a.height] = a.blockHash;
    if (detached.length) {
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

  /** Main-chain blocks from `from`, at most `count`. */
  range(from: number, count: number): StoredBlock[] {
    return this.#main.slice(from, from + count).map((h) => this.#blocks.get(h)!);
  }

  /** Tuples this node holds that the main chain does not carry (re-submitted after a reorg). */
  uncommittedTuples(): CoherenceTuple[] {
    return [...this.#tuples.values()].filter((t) => !this.#committed.has(t.epoch));
  }
}
