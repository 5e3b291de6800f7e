// The passes the Worker Runner runs. They span contexts above the residues (sleeves, memory), so
// they live in flows/worker-passes.ts; the runner takes them through this port, filled by the
// composition root (bin/assembly.ts).
import type { Platform } from '../../../lib/platform.ts';

export type PassResult = Record<string, unknown>;
export type Pass = (p: Platform, epoch: number) => Promise<PassResult>;

declare module '../../../lib/platform.ts' {
  interface Ports {
    /** The six passes in spec order (flows/worker-passes.ts PASSES). */
    workerPasses: ReadonlyArray<readonly [string, Pass]>;
  }
}

export function workerPasses(p: Platform): ReadonlyArray<readonly [string, Pass]> {
  if (!p.ports.workerPasses) throw new Error('worker: no passes wired (the composition root sets p.ports.workerPasses, bin/assembly.ts)');
  return p.ports.workerPasses;
}
