// A bound on how long a caller waits for work it does not control (a source, a peer, Medulla).

/** The work's result, or a rejection once `ms` pass without one (the work itself is not cancelled). */
export async function withTimeout<T>(work: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stall = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)));
  try {
    return await Promise.race([work(), stall]);
  } finally {
    clearTimeout(timer);
  }
}
