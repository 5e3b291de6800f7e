// A Medulla node: its chain, its miner loop (background duty cycle, or full speed while manual
// requests wait or the tip is late), coherence submissions, and peer sync.
import { verify } from '../../../lib/crypto.ts';
import type { Platform } from '../../../lib/platform.ts';
import { recordEvent } from '../../../lib/events.ts';
import { openResidue } from '../residue-port.ts';
import { crossRootOf, tupleMessage, type CoherenceTuple } from '../thalamus/coherence.ts';
import { Chain, TUPLE_HORIZON, type AcceptResult } from './chain.ts';
import { blockJson, toBlock, type Block } from './header.ts';
import { Miner } from './miner.ts';
import { announce, pollPeers, syncFrom } from './peers.ts';
import { parseBlock } from './validate.ts';
import { invalidParams } from './rpc.ts';

/** PGlite on a busy 2-core machine can exceed Prisma's 5 s default. */
const TX_OPTS = { timeout: 20_000, maxWait: 20_000 };

/**
 * An unpaced background search (MEDULLA_PACING=off) switches to full speed once the tip is this
 * many intervals old (a paced one once its block is due, one interval after the tip): on a loaded
 * machine the duty-cycled miner gets a small share of a core and epochs would stall until the
 * retarget caught up. Mining policy only: the difficulty rule is unchanged.
 */
export const LATE_INTERVALS = 2;

export interface MedullaNodeOptions {
  node: string;
  peers: string[];
  autoMine: boolean;
  duty: number;
  genesisDifficulty: number;
  intervalMs: number;
  /** Peer polling period. */
  pollMs: number;
  /** Paced background mining (MEDULLA_PACING, default on): a block is published one interval after its parent. */
  paced?: boolean;
  /** Blocks the chain keeps in memory below its tip (Chain's MEMORY_WINDOW unless a test says). */
  memoryWindow?: number;
}

export interface SubmitResult {
  accepted: true;
  epoch: number;
  crossRoot: string;
  operator: string;
  /** True when this operator already sent a different tuple for the epoch (residue + slash). */
  equivocation: boolean;
}

interface ManualRequest {
  resolve(b: Block): void;
  reject(e: Error): void;
}

export class MedullaNode {
  #miner: Miner;
  #manual: ManualRequest[] = [];
  #closed = false;
  #wake: (() => void) | null = null;
  #searching: { coherenceEpoch: number | null; full: boolean } | null = null;
  #loop: Promise<void> = Promise.resolve();
  #poll?: NodeJS.Timeout;
  #polling = false;
  self = '';
  peers: string[];

  private constructor(
    readonly p: Platform,
    readonly chain: Chain,
    readonly opts: MedullaNodeOptions,
  ) {
    this.peers = [...opts.peers];
    this.#miner = new Miner({ duty: opts.duty, sliceMs: 20 });
  }

  static async open(p: Platform, opts: MedullaNodeOptions): Promise<MedullaNode> {
    const chain = await Chain.open(p.db.prisma, {
      node: opts.node,
      intervalMs: opts.intervalMs,
      genesisDifficulty: opts.genesisDifficulty,
      residueExpiryEpochs: p.config.residueExpiryEpochs,
      memoryWindow: opts.memoryWindow,
    });
    return new MedullaNode(p, chain, opts);
  }

  get autoMine() {
    return this.opts.autoMine;
  }

  set autoMine(on: boolean) {
    this.opts.autoMine = on;
    this.#kick();
  }

  /** Starts mining and peer polling; announces the current tip on the bus. */
  async start(self: string): Promise<void> {
    this.self = self;
    const t = this.chain.tip();
    await this.p.bus
      .publish('cog.epoch.advanced', { type: 'epoch.advanced', ts: Date.now(), epoch: t.epoch, height: t.height, tip: t.blockHash, node: this.opts.node })
      .catch(() => {});
    this.#loop = this.#run();
    this.#poll = setInterval(() => void this.pollOnce(), this.opts.pollMs);
    this.#poll.unref();
  }

  async pollOnce(): Promise<void> {
    if (this.#polling || this.#closed || !this.peers.length) return;
    this.#polling = true;
    try {
      await pollPeers(this.chain, this.peers, this.p.log, () => this.#kick(), this.p.config.internalToken);
    } finally {
      this.#polling = false;
    }
  }

  #kick() {
    const w = this.#wake;
    this.#wake = null;
    w?.();
    if (this.#searching) this.#miner.cancel();
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      const pacing = this.opts.paced !== false;
      // A paced block is due one interval after its parent; past that its search goes full speed.
      const lateAt = this.chain.tip().tsMs + (pacing ? 1 : LATE_INTERVALS) * this.opts.intervalMs;
      const full = this.#manual.length > 0 || (this.opts.autoMine && Date.now() >= lateAt);
      if (!full && !this.opts.autoMine) {
        await new Promise<void>((r) => (this.#wake = r));
        continue;
      }
      const template = this.chain.template();
      // Paced: a background search solves the block that claims the time one interval after its
      // parent, and it is published at that time (below). Blocks then come every interval rather
      // than at exponentially distributed times (a PoW solve is memoryless), and the retarget,
      // which never sees a solve time below the interval, lets the difficulty settle where a solve
      // takes a fraction of it. Full-speed blocks (manual, late tip) claim the time they are found.
      const paced = !full && pacing;
      if (paced) template.tsMs = Math.max(template.tsMs, this.chain.tip().tsMs + this.opts.intervalMs);
      this.#searching = { coherenceEpoch: template.coherenceEpoch, full };
      // Re-plan at full speed if this background search makes the tip late (#kick cancels it).
      const late = full ? undefined : setTimeout(() => this.#kick(), Math.max(0, lateAt - Date.now()));
      late?.unref();
      const sol = await this.#miner.search(template, full);
      clearTimeout(late);
      // A paced block waits for its time; anything that needs a new plan meanwhile drops it.
      const interrupted = sol !== null && paced && !this.#closed && (await this.#holdUntil(sol.tsMs));
      this.#searching = null;
      if (!sol || interrupted || this.#closed) continue;
      const block = toBlock({ ...template, nonce: sol.nonce, tsMs: sol.tsMs });
      let r: AcceptResult;
      try {
        r = await this.chain.accept(block);
      } catch (e) {
        this.p.log.warn({ err: (e as Error).message }, 'medulla: mined block refused');
        continue;
      }
      if (r.status === 'extended' || r.status === 'reorg') {
        if (full) this.#manual.shift()?.resolve(blockJson(block));
        void announce(this.peers, blockJson(block), this.self, this.p.log, this.p.config.internalToken);
      }
    }
  }

  /**
   * Waits until `tsMs` (a paced block's time) unless something needs a new plan first: a manual
   * request, a peer's block, a coherence tuple for the template, closing (all via #kick). True when
   * interrupted; the held block is dropped then, and the next search starts from the current tip.
   */
  #holdUntil(tsMs: number): Promise<boolean> {
    const wait = tsMs - Date.now();
    if (wait <= 0) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = null;
        resolve(false);
      }, wait);
      timer.unref();
      this.#wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  /** Mines one block now at full speed; concurrent requests each get their own block. */
  mineNow(): Promise<Block> {
    if (this.#closed) return Promise.reject(new Error('medulla node closed'));
    return new Promise((resolve, reject) => {
      this.#manual.push({ resolve, reject });
      if (!this.#searching?.full) this.#kick();
    });
  }

  /** A block announced by a peer (`from` is where to fetch its ancestors). */
  async receiveBlock(raw: unknown, from?: string): Promise<AcceptResult['status']> {
    const block = parseBlock(raw);
    if (block.height > 0 && !(await this.chain.has(block.prevHash, block.height - 1))) {
      const sources = from ? [from, ...this.peers.filter((x) => x !== from)] : this.peers;
      for (const peer of sources) {
        try {
          await syncFrom(this.chain, peer, block.blockHash, this.p.config.internalToken);
          break;
        } catch (e) {
          this.p.log.debug({ peer, err: (e as Error).message }, 'fetching a branch failed');
        }
      }
      if (!(await this.chain.has(block.blockHash, block.height))) await this.chain.accept(block); // unknown-parent surfaces here
      this.#kick();
      return this.chain.tip().blockHash === block.blockHash ? 'extended' : 'side';
    }
    const r = await this.chain.accept(block);
    if (r.status === 'extended' || r.status === 'reorg') this.#kick();
    return r.status;
  }

  /** submitcoherenceroot: records the tuple (first per epoch is committed), detects equivocation. */
  async submitCoherence(t: CoherenceTuple, operator?: string, signature?: string): Promise<SubmitResult> {
    if (t.crossRoot !== crossRootOf(t.evmRoot, t.ipfsRoot, t.sleevesRoot)) {
      throw invalidParams('crossRoot must be sha256("cog-coh-v1" || evmRoot || btcRoot || ipfsRoot || sleevesRoot) with btcRoot = 32 zero bytes');
    }
    const tip = this.chain.tip().height;
    if (t.epoch > tip + TUPLE_HORIZON) throw invalidParams(`epoch ${t.epoch} is too far ahead of the chain (height ${tip})`);
    if (t.epoch < tip - TUPLE_HORIZON) throw invalidParams(`epoch ${t.epoch} is older than the commitment horizon (${TUPLE_HORIZON} blocks)`);
    if (operator !== undefined && (signature === undefined || !verify(signature, tupleMessage(t), operator))) {
      throw invalidParams("signature must be the operator's ed25519 signature over the tuple");
    }
    const op = operator ?? 'anonymous';
    const node = this.opts.node;
    let equivocation = false;
    await this.p.db.prisma.$transaction(async (tx) => {
      const other = await tx.coherenceSubmission.findFirst({
        where: { epoch: t.epoch, operator: op, NOT: { crossRoot: t.crossRoot } },
        orderBy: { id: 'asc' },
      });
      const same = await tx.coherenceSubmission.findUnique({
        where: { node_epoch_operator_crossRoot: { node, epoch: t.epoch, operator: op, crossRoot: t.crossRoot } },
      });
      if (!same) {
        await tx.coherenceSubmission.create({
          data: { node, epoch: t.epoch, operator: op, crossRoot: t.crossRoot, evmRoot: t.evmRoot, ipfsRoot: t.ipfsRoot, sleevesRoot: t.sleevesRoot, signature },
        });
      }
      if (!other) return;
      equivocation = true;
      const { residue, created } = await openResidue(tx, {
        kind: 'routing-equivocation',
        trigger: `operator ${op} submitted two distinct coherence tuples for epoch ${t.epoch}`,
        epoch: tip,
        evidence: { operator: op, epoch: t.epoch, crossRoots: [other.crossRoot, t.crossRoot], signatures: [other.signature, signature ?? null] },
        dedupeKey: `routing-equivocation:${op}:${t.epoch}`,
        expiryEpochs: this.p.config.residueExpiryEpochs,
      });
      // An unsigned submitter ('anonymous') is nobody: no key, no stake, nothing to slash. Its
      // residue still opens (claimable with the two tuples); no slash request goes out for it.
      if (created && op !== 'anonymous') {
        await recordEvent(tx, {
          subject: 'cog.treasury.slash',
          type: 'treasury.slash',
          data: { operator: op, epoch: t.epoch, reason: 'routing-equivocation', residueId: residue.id },
          msgId: `slash:${op}:${t.epoch}`,
        });
      }
    }, TX_OPTS);
    this.chain.addTuple(t);
    const s = this.#searching;
    if (s && !s.full && s.coherenceEpoch !== (this.chain.pendingTuple()?.epoch ?? null)) this.#kick();
    return { accepted: true, epoch: t.epoch, crossRoot: t.crossRoot, operator: op, equivocation };
  }

  /** Stops and starts talking to peers (tests partition nodes with it). */
  setPeers(peers: string[]): void {
    this.peers = [...peers];
  }

  async measureHashrate(ms: number) {
    return this.#miner.measure(this.chain.template(), ms);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#poll) clearInterval(this.#poll);
    for (const m of this.#manual.splice(0)) m.reject(new Error('medulla node closed'));
    this.#kick();
    await this.#miner.close();
    await this.#loop.catch(() => {});
    await this.chain.serial(async () => {});
  }
}
