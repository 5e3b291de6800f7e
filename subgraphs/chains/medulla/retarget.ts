// Difficulty retarget: a linearly weighted moving average (LWMA) over recent solve times, so that
// blocks come every `intervalMs` on average. Deterministic integer math: every node computes the
// same difficulty for the same parent, so a header's difficulty is checkable.
//
// Rule, for the block at height h (whose parent is at h-1):
//   * Solve times are known for blocks of height >= 2 (genesis has a fixed, old timestamp, so the
//     gap genesis -> 1 says nothing): st_j = tsMs_j - tsMs_{j-1}, clamped to [1, 6*T].
//   * Window: heights j = max(2, h-N) .. h-1, k = its size. k = 0 -> the parent's difficulty.
//   * next = floor( sum(D_j) * T * (k+1) / (2 * sum(w_j * st_j)) ), w_j = 1..k oldest to newest
//     (the LWMA of Zawy's algorithm, written in difficulty terms).
//   * Clamped to [parentD / 4, parentD * 4] (floor, and at least 1), then to [1, MAX_DIFFICULTY].

export const RETARGET_WINDOW = 30;
export const MAX_SOLVE_FACTOR = 6;
export const MAX_STEP = 4;
/** Fits the 32-bit integer column; ~35 min of full-speed hashing on one core. */
export const MAX_DIFFICULTY = 2_147_483_647;

export interface RetargetPoint {
  height: number;
  tsMs: number;
  difficulty: number;
}

/**
 * Difficulty required of the block after `chain`'s last element. `chain` holds the parent and
 * (up to) RETARGET_WINDOW of its ancestors, oldest first, consecutive heights.
 */
export function nextDifficulty(chain: readonly RetargetPoint[], intervalMs: number): number {
  const parent = chain[chain.length - 1];
  const h = parent.height + 1;
  const T = BigInt(intervalMs);
  const from = Math.max(2, h - RETARGET_WINDOW);
  const window: { st: bigint; d: bigint }[] = [];
  for (let i = 1; i < chain.length; i++) {
    const b = chain[i];
    if (b.height < from) continue;
    const a = chain[i - 1];
    let st = BigInt(b.tsMs - a.tsMs);
    if (st < 1n) st = 1n;
    if (st > T * BigInt(MAX_SOLVE_FACTOR)) st = T * BigInt(MAX_SOLVE_FACTOR);
    window.push({ st, d: BigInt(b.difficulty) });
  }
  const k = window.length;
  if (k === 0) return parent.difficulty;
  let sumD = 0n;
  let weighted = 0n;
  window.forEach((w, i) => {
    sumD += w.d;
    weighted += BigInt(i + 1) * w.st;
  });
  let next = (sumD * T * BigInt(k + 1)) / (2n * weighted);
  const pd = BigInt(parent.difficulty);
  const lo = pd / BigInt(MAX_STEP) > 0n ? pd / BigInt(MAX_STEP) : 1n;
  const hi = pd * BigInt(MAX_STEP);
  if (next < lo) next = lo;
  if (next > hi) next = hi;
  if (next < 1n) next = 1n;
  if (next > BigInt(MAX_DIFFICULTY)) next = BigInt(MAX_DIFFICULTY);
  return Number(next);
}
