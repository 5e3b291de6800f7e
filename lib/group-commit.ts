// Group commit, as databases do with their log: calls queued while batches are being committed are
// committed together as the next batch, so N concurrent writers cost one statement, not N. A batch
// spans keys (stacks): it takes the waiting calls of every key that has no batch running, in arrival
// order, so 32 clients over 32 stacks cost one statement a round as 32 clients on one stack do. A
// key is in at most one running batch, so its calls commit in arrival order, batch after batch.
// Calls that arrive in one turn of the event loop start together (the batch forms on the next
// check phase, no timer); each caller gets its own outcome (one write refused does not refuse the
// others: `run` answers per item).

export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

export interface GroupCommitter<I, R> {
  (key: string, item: I): Promise<R>;
  /** Keys with a batch running or calls waiting (tests). */
  busy(): number;
}

/** One key's calls in a batch, in arrival order. */
export interface KeyBatch<I> {
  key: string;
  items: I[];
}

export interface GroupCommitOptions {
  /** Calls in one batch at most. */
  maxBatch?: number;
  /** Batches running at once (each over other keys): one plans while another commits. */
  maxConcurrent?: number;
}

export function groupCommitter<I, R>(run: (batch: ReadonlyArray<KeyBatch<I>>) => Promise<Outcome<R>[][]>, opts: GroupCommitOptions = {}): GroupCommitter<I, R> {
  const maxBatch = opts.maxBatch ?? 256;
  const maxConcurrent = opts.maxConcurrent ?? 2;
  type Waiting = { item: I; resolve: (r: R) => void; reject: (e: unknown) => void };
  /** Waiting calls per key; a Map keeps keys in the order they started waiting. */
  const waiting = new Map<string, Waiting[]>();
  const runningKeys = new Set<string>();
  let running = 0;
  let scheduled = false;

  const take = (): Array<{ key: string; calls: Waiting[] }> => {
    const batch: Array<{ key: string; calls: Waiting[] }> = [];
    let room = maxBatch;
    for (const [key, calls] of waiting) {
      if (room === 0) break;
      if (runningKeys.has(key)) continue;
      const mine = calls.length <= room ? calls : calls.splice(0, room);
      if (mine === calls) waiting.delete(key);
      room -= mine.length;
      batch.push({ key, calls: mine });
    }
    return batch;
  };

  const settle = (calls: Waiting[], outcomes: Outcome<R>[] | undefined) => {
    calls.forEach((w, i) => {
      const o = outcomes?.[i];
      if (!o) w.reject(new Error('group commit: no outcome for a write'));
      else if (o.ok) w.resolve(o.value);
      else w.reject(o.error);
    });
  };

  const pump = () => {
    scheduled = false;
    while (running < maxConcurrent) {
      const batch = take();
      if (!batch.length) return;
      running++;
      for (const b of batch) runningKeys.add(b.key);
      void run(batch.map((b) => ({ key: b.key, items: b.calls.map((w) => w.item) })))
        .then(
          (outcomes) => batch.forEach((b, i) => settle(b.calls, outcomes[i])),
          (e) => {
            for (const b of batch) for (const w of b.calls) w.reject(e);
          },
        )
        .finally(() => {
          running--;
          for (const b of batch) runningKeys.delete(b.key);
          pump();
        });
    }
  };

  const submit = ((key: string, item: I) =>
    new Promise<R>((resolve, reject) => {
      let calls = waiting.get(key);
      if (!calls) waiting.set(key, (calls = []));
      calls.push({ item, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(pump);
      }
    })) as GroupCommitter<I, R>;
  submit.busy = () => new Set([...runningKeys, ...waiting.keys()]).size;
  return submit;
}
