// Work that never waits on I/O handing the event loop back every few milliseconds: a promise that
// settles without I/O never lets the loop turn, so a chain of them holds it until the chain ends,
// and the process answers no request, renews no sleeve lease and ticks nothing meanwhile. Used by
// the Cortex submitter between the transactions it encodes and signs (ethers, in JavaScript: a
// round of large settlements ran as one task of up to 3.3 s at 1,000,000 stacks) and before each
// call into PGlite, which runs in this thread (lib/db/index.ts).

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
