import { afterAll, describe, expect, it } from 'vitest';
import { hashHeader, meetsTarget, ZERO_HASH, type BlockHeader } from './header.ts';
import { Miner } from './miner.ts';

const header = (difficulty: number, prevHash: string): BlockHeader => ({
  prevHash,
  height: 7,
  epoch: 7,
  difficulty,
  tsMs: Date.now(),
  crossRoot: 'ab'.repeat(32),
  evmRoot: 'cd'.repeat(32),
  ipfsRoot: 'ef'.repeat(32),
  sleevesRoot: '01'.repeat(32),
  coherenceEpoch: 6,
  synapticFieldRoot: '23'.repeat(32),
  nonce: 0,
});

describe('miner worker', () => {
  const miner = new Miner({ duty: 1, sliceMs: 20 });
  afterAll(() => miner.close());

  it('finds nonces whose header hash (SHA-256 twice over the whole header) meets the target', async () => {
    // Distinct headers (the midstate covers the first 192 bytes, tsMs among them); the hash the
    // worker reports must be the one the chain computes for the block it would become.
    for (const [i, difficulty] of [1_000, 20_000, 100_000].entries()) {
      const h = header(difficulty, i ? String(i).repeat(64) : ZERO_HASH);
      const sol = await miner.search(h, true);
      expect(sol).not.toBeNull();
      const mined = { ...h, nonce: sol!.nonce, tsMs: sol!.tsMs };
      expect(sol!.tsMs).toBeGreaterThanOrEqual(h.tsMs);
      expect(hashHeader(mined)).toBe(sol!.hash);
      expect(meetsTarget(sol!.hash, difficulty)).toBe(true);
      expect(sol!.hashes).toBeGreaterThan(0);
    }
  });
});
