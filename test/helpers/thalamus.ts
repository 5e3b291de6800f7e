// Shared by the Thalamus tests: an independent RFC 6962 Merkle Tree Hash (the recursive definition
// of the RFC, so the fold's roots are recomputed without lib/merkle.ts), and a test platform with
// an in-process Hippocampus (the fold's DAG leaves come through it), and a poll for fold results.
import { createHash } from 'node:crypto';
import { startHippocampus } from '../../subgraphs/memory/hippocampus/service.ts';
import { localHippocampus } from '../../subgraphs/memory/hippocampus/client.ts';
import type { RunningService } from '../../lib/service.ts';
import { testPlatform, type TestPlatform } from './platform.ts';

export const sha = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();

/** RFC 6962 MTH: leaf = sha256(0x00 ‖ d), node = sha256(0x01 ‖ l ‖ r), split at the largest power of two below n. */
export function mth(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return sha();
  if (leaves.length === 1) return sha(Buffer.from([0]), leaves[0]);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return sha(Buffer.from([1]), mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

/** The first truthy value `fn` yields (polled every 25 ms), or an error after `ms`. */
export async function waitFor<T>(fn: () => Promise<T | null | undefined | false>, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A test platform with its epoch interval and an in-process Hippocampus; close() stops both. */
export async function thalamusPlatform(epochIntervalMs: number): Promise<{ p: TestPlatform; hippocampus: RunningService; close(): Promise<void> }> {
  const p = await testPlatform({ COG_EPOCH_INTERVAL_MS: String(epochIntervalMs), HIPPOCAMPUS_PORT: '0' });
  const hippocampus = await startHippocampus(p);
  p.ports.hippocampus = localHippocampus(p);
  return {
    p,
    hippocampus,
    async close() {
      await hippocampus.close();
      await p.cleanup();
    },
  };
}
