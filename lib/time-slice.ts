// Long loops of synchronous work (encoding and signing a round's chain transactions) handing the
// event loop back between items: ethers encodes and signs in JavaScript, and a promise that settles
// without I/O never lets the loop turn, so a round of large settlements ran as one task of seconds
// (bench/scale.ts at 1,000,000 stacks: up to 3.3 s), during which the process answered no request,
// renewed no sleeve lease and ticked nothing.

/**
 * A checkpoint to await between the items of a loop: it yields to the event loop (timers, I/O)
 * once `sliceMs` of work has run since the last yield, and costs a clock read otherwise.
 */
export function timeSlicer(sliceMs = 10): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    since = performance.now();
  };
}
