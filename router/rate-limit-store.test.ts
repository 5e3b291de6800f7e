// The gateway rate limit's batched count (CacheStore in router/auth.ts) over a cache whose answers
// this test releases by hand: what a gateway answers while its batch is on the way to the cache.
import { afterEach, describe, expect, it } from 'vitest';
import type { Platform } from '../lib/platform.ts';
import { CacheStore } from './auth.ts';

/** A cache that adds at once and answers each incr only when the test releases it. */
function heldCache() {
  let total = 0;
  const held: Array<() => void> = [];
  const cache = {
    incr: (_key: string, _ttlMs?: number, by = 1) =>
      new Promise<number>((resolve) => {
        total += by;
        const now = total;
        held.push(() => resolve(now));
      }),
  } as unknown as Platform['cache'];
  return { cache, held, total: () => total };
}

// An hour-long window, so the test never straddles two.
const WINDOW_MS = 3_600_000;
const FLOOD = 1000;

let store: CacheStore | undefined;
afterEach(() => store?.close());

/** A store over `cache` and its first request of the window, answered (through the cache, released here). */
async function started(cache: Platform['cache'], held: Array<() => void>) {
  const s = new CacheStore(cache);
  store = s;
  const count = () => new Promise<number>((resolve, reject) => s.incr('client', (e, r) => (e ? reject(e) : resolve(r!.current)), WINDOW_MS, FLOOD));
  const first = count();
  held.shift()!();
  expect(await first).toBe(1);
  return count;
}

describe('the rate limit counted in batches', () => {
  it('answers each request with the exact count while a batch is on its way to the cache', async () => {
    const c = heldCache();
    // The window's first request goes through the cache and waits for its total; then the gateway counts locally.
    const count = await started(c.cache, c.held);
    for (let i = 2; i <= 20; i++) expect(await count()).toBe(i);
    // The batch (19) leaves for the cache, whose answer is held.
    for (let i = 0; i < 40 && !c.held.length; i++) await new Promise((r) => setTimeout(r, 10));
    expect(c.held).toHaveLength(1);
    expect(c.total()).toBe(20);
    // Meanwhile every answer still counts it (without it they said 2, 3, ...).
    for (let i = 21; i <= 30; i++) expect(await count()).toBe(i);
    // Its total comes back and replaces it: no request counted twice.
    c.held.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(await count()).toBe(31);
  });

  it('a batch the cache never takes is dropped from the count, as the requests went through', async () => {
    const c = heldCache();
    let fail = false;
    const cache = {
      incr: (k: string, t?: number, by?: number) => (fail ? Promise.reject(new Error('cache down')) : c.cache.incr(k, t, by)),
    } as unknown as Platform['cache'];
    const count = await started(cache, c.held);
    for (let i = 2; i <= 5; i++) expect(await count()).toBe(i);
    fail = true;
    await new Promise((r) => setTimeout(r, 120)); // the batch of 4 went and failed
    fail = false;
    expect(await count()).toBe(2); // what the cache last said (1), and this one
  });
});
