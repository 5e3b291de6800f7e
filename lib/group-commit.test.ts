import { describe, expect, it } from 'vitest';
import { groupCommitter, type KeyBatch, type Outcome } from './group-commit.ts';

/** A committer whose batches wait until released, recording what each batch held. */
function recording(opts: { maxBatch?: number; maxConcurrent?: number } = {}) {
  const batches: Array<Array<KeyBatch<number>>> = [];
  const gates: Array<() => void> = [];
  const commit = groupCommitter<number, string>(async (batch) => {
    batches.push(batch.map((b) => ({ key: b.key, items: [...b.items] })));
    await new Promise<void>((r) => gates.push(r));
    return batch.map((b) =>
      b.items.map((i): Outcome<string> => (i < 0 ? { ok: false, error: new Error(`refused ${i}`) } : { ok: true, value: `${b.key}:${i}` })),
    );
  }, opts);
  const release = async () => {
    while (!gates.length) await new Promise((r) => setImmediate(r));
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
  };
  return { commit, batches, release };
}

describe('groupCommitter', () => {
  it('commits calls of many keys that arrive together as one batch, each key in arrival order, each caller its own outcome', async () => {
    const { commit, batches, release } = recording();
    const calls = [commit('a', 1), commit('b', 1), commit('a', 2), commit('c', -1), commit('b', 2)];
    const settled = Promise.allSettled(calls);
    await release();
    const out = await settled;
    expect(batches).toEqual([
      [
        { key: 'a', items: [1, 2] },
        { key: 'b', items: [1, 2] },
        { key: 'c', items: [-1] },
      ],
    ]);
    expect(out.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message))).toEqual(['a:1', 'b:1', 'a:2', 'refused -1', 'b:2']);
  });

  it('keeps a key out of a second batch while its first runs; other keys go in the next batch at once', async () => {
    const { commit, batches, release } = recording({ maxConcurrent: 2 });
    const first = commit('a', 1);
    await new Promise((r) => setImmediate(r));
    expect(batches).toHaveLength(1); // a's first batch runs
    const later = [commit('a', 2), commit('b', 1)];
    await new Promise((r) => setImmediate(r));
    expect(batches[1]).toEqual([{ key: 'b', items: [1] }]); // b goes; a waits for its own batch
    await release(); // a's first batch
    await release(); // b's
    await release(); // a's second
    expect(await Promise.all([first, ...later])).toEqual(['a:1', 'a:2', 'b:1']);
    expect(batches[2]).toEqual([{ key: 'a', items: [2] }]);
  });

  it('splits a backlog into batches of maxBatch calls and runs at most maxConcurrent at once', async () => {
    const { commit, batches, release } = recording({ maxBatch: 3, maxConcurrent: 1 });
    const calls = Array.from({ length: 7 }, (_, i) => commit(`k${i}`, i));
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setImmediate(r));
      expect(batches).toHaveLength(i + 1);
      await release();
    }
    await Promise.all(calls);
    expect(batches.map((b) => b.map((k) => k.key))).toEqual([['k0', 'k1', 'k2'], ['k3', 'k4', 'k5'], ['k6']]);
  });

  it('rejects every call of a batch whose run throws, and goes on with the next', async () => {
    let n = 0;
    const commit = groupCommitter<number, number>(async (batch) => {
      if (n++ === 0) throw new Error('database down');
      return batch.map((b) => b.items.map((i) => ({ ok: true, value: i })));
    });
    const failed = [commit('a', 1), commit('b', 2)];
    await expect(Promise.all(failed)).rejects.toThrow('database down');
    await Promise.allSettled(failed);
    expect(await commit('a', 3)).toBe(3);
    await new Promise((r) => setImmediate(r));
    expect(commit.busy()).toBe(0);
  });
});
