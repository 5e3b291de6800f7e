// One timer for all of a runtime's sleeves: a min-heap of next-tick times, and a single setTimeout
// armed for the earliest. An entry names a sleeve and the generation of its schedule; rescheduling a
// sleeve bumps its generation, so its old entry is dropped when it comes up (no search in the heap).

export interface Due {
  at: number;
  id: string;
  gen: number;
  /** This entry's quantum (ms), when it is not the wheel's: it fires at the end of its own. */
  quantumMs?: number;
}

/** Binary min-heap on `at`, ties in the order `tie` gives (none by default). */
export class DueHeap<T extends { at: number } = Due> {
  private readonly a: T[] = [];

  constructor(private readonly tie: (x: T, y: T) => number = () => 0) {}

  private less(x: T, y: T): boolean {
    return x.at < y.at || (x.at === y.at && this.tie(x, y) < 0);
  }

  get size(): number {
    return this.a.length;
  }

  peek(): T | undefined {
    return this.a[0];
  }

  push(d: T): void {
    const a = this.a;
    a.push(d);
    let i = a.length - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.less(a[i]!, a[up]!)) break;
      [a[up], a[i]] = [a[i]!, a[up]!];
      i = up;
    }
  }

  pop(): T | undefined {
    const a = this.a;
    const top = a[0];
    const last = a.pop();
    if (a.length && last) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l]!, a[m]!)) m = l;
        if (r < a.length && this.less(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i]!, a[m]!];
        i = m;
      }
    }
    return top;
  }

  clear(): void {
    this.a.length = 0;
  }
}

/**
 * The runtime's timer wheel: `add` a sleeve's next due time, and `fire(due)` is called for each entry
 * when it comes due (late entries fire as soon as the process gets to them, in due order).
 * `current(id, gen)` tells whether an entry is still the sleeve's schedule. With `quantumMs`, the
 * timer goes off only at multiples of it: the entries due within one quantum fire together, at its
 * end (each at most a quantum late), so a runtime's ticks come in batches of a quantum's worth
 * rather than one timer, and one batch, for every few due in the same millisecond. An entry with a
 * quantum of its own (`Due.quantumMs`) fires at the end of its own quantum instead: the heap is
 * ordered by when each entry fires, then by when it was due.
 */
export function timerWheel(opts: { fire: (d: Due, lateMs: number) => void; current: (d: Due) => boolean; quantumMs?: number }) {
  const wheelQ = Math.max(1, Math.floor(opts.quantumMs ?? 1));
  /** When the timer goes off for an entry: the end of its quantum. */
  const slot = (d: Due) => {
    const q = d.quantumMs === undefined ? wheelQ : Math.max(1, Math.floor(d.quantumMs));
    return Math.ceil(d.at / q) * q;
  };
  type Entry = { at: number; due: Due };
  const heap = new DueHeap<Entry>((x, y) => x.due.at - y.due.at);
  let timer: NodeJS.Timeout | undefined;
  let armedAt = Number.POSITIVE_INFINITY;
  let stopped = false;

  function arm(): void {
    // Drop stale entries at the top, so the timer is armed for a live one.
    while (heap.size && !opts.current(heap.peek()!.due)) heap.pop();
    const top = heap.peek();
    if (stopped || !top) {
      clearTimeout(timer);
      timer = undefined;
      armedAt = Number.POSITIVE_INFINITY;
      return;
    }
    if (timer && armedAt <= top.at) return;
    clearTimeout(timer);
    armedAt = top.at;
    timer = setTimeout(run, Math.max(0, top.at - Date.now()));
    timer.unref();
  }

  function run(): void {
    timer = undefined;
    armedAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    while (heap.size && heap.peek()!.at <= now) {
      const { due } = heap.pop()!;
      if (opts.current(due)) opts.fire(due, now - due.at);
    }
    arm();
  }

  return {
    add(d: Due): void {
      if (stopped) return;
      const e = { at: slot(d), due: d };
      heap.push(e);
      if (e.at < armedAt) arm();
    },
    /** Entries in the heap, stale ones included (tests). */
    size: () => heap.size,
    stop(): void {
      stopped = true;
      heap.clear();
      arm();
    },
  };
}
