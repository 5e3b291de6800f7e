// Group commit, as databases do with their log: calls queued under one key (a stack) while a batch
// of that key is being committed are committed together as the next batch, so N concurrent writers
// of one stack cost one transaction, not N. The first call of an idle key starts at once (no wait
// to fill a batch); each caller gets its own outcome (one write refused does not refuse the others:
// `run` answers per item). Batches of a key run one at a time, in arrival order.

export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

export interface GroupCommitter<I, R> {
  (key: string, item: I): Promise<R>;
  /** Keys with a batch running or calls waiting (tests). */
  busy(): number;
}

export function groupCommitter<I, R>(run: (key: string, items: I[]) => Promise<Outcome<R>[]>, opts: { maxBatch?: number } = {}): GroupCommitter<I, R> {
  const max = opts.maxBatch ?? 256;
  type Waiting = { item: I; resolve: (r: R) => void; reject: (e: unknown) => void };
  const queues = new Map<string, Waiting[]>();
  const running = new Set<string>();

  async function drain(key: string): Promise<void> {
    running.add(key);
    try {
      for (;;) {
        const queue = queues.get(key);
        if (!queue?.length) {
          queues.delete(key);
          return;
        }
        const batch = queue.splice(0, max);
        let outcomes: Outcome<R>[];
        try {
          outcomes = await run(
            key,
            batch.map((w) => w.item),
          );
        } catch (e) {
          for (const w of batch) w.reject(e);
          continue;
        }
        batch.forEach((w, i) => {
          const o = outcomes[i];
          if (!o) w.reject(new Error('group commit: no outcome for a write'));
          else if (o.ok) w.resolve(o.value);
          else w.reject(o.error);
        });
      }
    } finally {
      running.delete(key);
    }
  }

  const submit = ((key: string, item: I) =>
    new Promise<R>((resolve, reject) => {
      let queue = queues.get(key);
      if (!queue) queues.set(key, (queue = []));
      queue.push({ item, resolve, reject });
      if (!running.has(key)) void drain(key);
    })) as GroupCommitter<I, R>;
  submit.busy = () => new Set([...running, ...queues.keys()]).size;
  return submit;
}
