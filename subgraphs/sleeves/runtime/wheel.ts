// One timer for all of a runtime's sleeves: a min-heap of next-tick times, and a single setTimeout
// armed for the earliest. An entry names a sleeve and the generation of its schedule; rescheduling a
// sleeve bumps its generation, so its old entry is dropped when it comes up (no search in the heap).

export interface Due {
  at: number;
  id: string;
  gen: number;
}

/** Binary min-heap on `at`. */
export class DueHeap {
  private readonly a: Due[] = [];

  get size(): number {
    return this.a.length;
  }

  peek(): Due | undefined {
    return this.a[0];
  }

  push(d: Due): void {
    const a = this.a;
    a.push(d);
    let i = a.length - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (a[up]!.at <= a[i]!.at) break;
      [a[up], a[i]] = [a[i]!, a[up]!];
      i = up;
    }
  }

  pop(): Due | undefined {
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
        if (l < a.length && a[l]!.at < a[m]!.at) m = l;
        if (r < a.length && a[r]!.at < a[m]!.at) m = r;
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
 * rather than one timer, and one batch, for every few due in the same millisecond.
 */
export function timerWheel(opts: { fire: (d: Due, lateMs: number) => void; current: (d: Due) => boolean; quantumMs?: number }) {
  const q = Math.max(1, Math.floor(opts.quantumMs ?? 1));
  /** When the timer goes off for an entry due at `at`: the end of its quantum. */
  const slot = (at: number) => Math.ceil(at / q) * q;
  const heap = new DueHeap();
  let timer: NodeJS.Timeout | undefined;
  let armedAt = Number.POSITIVE_INFINITY;
  let stopped = false;

  function arm(): void {
    // Drop stale entries at the top, so the timer is armed for a live one.
    while (heap.size && !opts.current(heap.peek()!)) heap.pop();
    const top = heap.peek();
    if (stopped || !top) {
      clearTimeout(timer);
      timer = undefined;
      armedAt = Number.POSITIVE_INFINITY;
      return;
    }
    const at = slot(top.at);
    if (timer && armedAt <= at) return;
    clearTimeout(timer);
    armedAt = at;
    timer = setTimeout(run, Math.max(0, at - Date.now()));
    timer.unref();
  }

  function run(): void {
    timer = undefined;
    armedAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    while (heap.size && heap.peek()!.at <= now) {
      const d = heap.pop()!;
      if (opts.current(d)) opts.fire(d, now - d.at);
    }
    arm();
  }

  return {
    add(d: Due): void {
      if (stopped) return;
      heap.push(d);
      if (slot(d.at) < armedAt) arm();
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
