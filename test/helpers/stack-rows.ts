// A Stack row inserted directly, as fixtures are (no identity mint, no accrual row): the tests that
// seed many stacks at once, and the router benchmark's seed.

/** The i-th fixture stack (0-based): a Shape A human stack with unit coefficients and a stand-in secret. */
export function stackRow(i: number) {
  return {
    id: `stack:human:${i + 1}:${i.toString(16).padStart(12, '0')}`,
    name: `s${i}`,
    kind: 'human',
    shape: 'A',
    pubKey: i.toString(16).padStart(64, '0'),
    syncCoeff: 1,
    memoryCoeff: 1,
    computeCoeff: 1,
    residueCoeff: 1,
    routingCoeff: 1,
    masterSecret: 'x',
  };
}
