// The miner: one worker thread that searches nonces for one header at a time. A new search
// replaces (and resolves null) the previous one, so the chain can retarget the miner at a new tip.
import { Worker } from 'node:worker_threads';
import { randomInt } from 'node:crypto';
import { encodeHeader, targetBytes, type BlockHeader } from './header.ts';

export interface MinerOptions {
  /** Fraction of one core a background search may use (0 < duty <= 1). */
  duty: number;
  /** Hashing slice between yields, ms. */
  sliceMs: number;
}

export interface Solution {
  nonce: number;
  tsMs: number;
  hash: string;
  hashes: number;
}

interface Pending {
  id: number;
  resolve(s: Solution | null): void;
}

export class Miner {
  #worker: Worker;
  #seq = 0;
  #pending: Pending | null = null;
  #exhausted = new Map<number, (r: { hashes: number; elapsedMs: number }) => void>();
  constructor(private readonly opts: MinerOptions) {
    this.#worker = new Worker(new URL('./miner-worker.mjs', import.meta.url));
    this.#worker.unref();
    this.#worker.on('message', (m: { type: string; id: number } & Solution & { elapsedMs: number }) => {
      if (m.type === 'found' && this.#pending?.id === m.id) {
        const p = this.#pending;
        this.#pending = null;
        p.resolve({ nonce: m.nonce, tsMs: m.tsMs, hash: m.hash, hashes: m.hashes });
      } else if (m.type === 'exhausted') {
        this.#exhausted.get(m.id)?.({ hashes: m.hashes, elapsedMs: m.elapsedMs });
        this.#exhausted.delete(m.id);
        if (this.#pending?.id === m.id) this.#pending = null;
      }
    });
    this.#worker.on('error', () => this.#drop());
  }

  #drop() {
    const p = this.#pending;
    this.#pending = null;
    p?.resolve(null);
  }

  #post(header: BlockHeader, full: boolean, stopAfterMs?: number): number {
    this.#drop();
    const id = ++this.#seq;
    // The nonce space starts at a random point so two nodes never search the same headers.
    this.#worker.postMessage({
      type: 'job',
      id,
      header: encodeHeader(header),
      target: targetBytes(header.difficulty),
      minTsMs: header.tsMs,
      nonce: randomInt(0, 2 ** 40),
      full,
      sliceMs: this.opts.sliceMs,
      duty: this.opts.duty,
      stopAfterMs,
    });
    return id;
  }

  /** Searches a nonce for `header` (its tsMs is the lower bound for the block's timestamp). */
  search(header: BlockHeader, full: boolean): Promise<Solution | null> {
    return new Promise((resolve) => {
      const id = this.#post(header, full);
      this.#pending = { id, resolve };
    });
  }

  /** Full-speed hashing for a fixed time against an unreachable target (benchmarks). */
  measure(header: BlockHeader, ms: number): Promise<{ hashes: number; elapsedMs: number }> {
    return new Promise((resolve) => {
      const id = this.#post({ ...header, difficulty: 2_147_483_647 * 1000 }, true, ms);
      this.#exhausted.set(id, resolve);
    });
  }

  cancel(): void {
    this.#drop();
    this.#worker.postMessage({ type: 'cancel' });
  }

  async close(): Promise<void> {
    this.#drop();
    await this.#worker.terminate();
  }
}
