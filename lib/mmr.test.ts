import { describe, it, expect } from 'vitest';
import { createHash } from 'node:crypto';
import { fromHex, toHex } from './crypto.ts';
import { merkleRoot } from './merkle.ts';
import { SYNAPTIC_PROOF_HASHES, SYNAPTIC_WINDOW, SynapticField, synapticProofLength, synapticRoot, verifySynapticProof, type SynapticProof } from './mmr.ts';

const sha = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};
const blockHash = (height: number) => sha(new TextEncoder().encode(`medulla-block-${height}`));
const blocks = (from: number, count: number) => Array.from({ length: count }, (_, i) => blockHash(from + i));
const field = (hashes: Uint8Array[]) => {
  const f = new SynapticField();
  for (const h of hashes) f.append(h);
  return f;
};

// The header's construction, transcribed independently: perfect peaks (oldest first), bagged right
// to left, then SHA-256("cog-synaptic-v1" || uint32_be(n) || bag).
function peaksRoot(leaves: Uint8Array[]): Uint8Array {
  const size = new Uint8Array(4);
  new DataView(size.buffer).setUint32(0, leaves.length);
  const tag = new TextEncoder().encode('cog-synaptic-v1');
  if (leaves.length === 0) return sha(tag, size);
  const perfect = (xs: Uint8Array[]): Uint8Array =>
    xs.length === 1 ? sha(new Uint8Array([0]), xs[0]) : sha(new Uint8Array([1]), perfect(xs.slice(0, xs.length / 2)), perfect(xs.slice(xs.length / 2)));
  const peaks: Uint8Array[] = [];
  let at = 0;
  for (let bit = 1 << 30; bit >= 1; bit >>>= 1) {
    if (leaves.length & bit) {
      peaks.push(perfect(leaves.slice(at, at + bit)));
      at += bit;
    }
  }
  let acc = peaks[peaks.length - 1];
  for (let j = peaks.length - 2; j >= 0; j--) acc = sha(new Uint8Array([1]), peaks[j], acc);
  return sha(tag, size, acc);
}

// Computed outside this codebase (Python hashlib, straight from the header text) over
// blockHash(h) = SHA-256("medulla-block-<h>"), h = 0..n-1; the last is blocks 44..299 (n = 300 after eviction).
const PINNED: [number, string][] = [
  [0, '3b71eda108fdf5eaa3fb39f3807475ad3e7dcdcacb8fa58581f486586c3e5914'],
  [1, 'ec97db8daf8e03a8432dc5c42f9c0987e86149f32fa931a64d1320d73db19c71'],
  [3, '1fa12e103f3811e6e362ad9eb155e1374d0229669a0f8ab1502d19d4ee27dc1a'],
  [7, 'bc64382d77d54b3c2f39d9412db86529643c05ac9619c905b006ba0eea8f0513'],
  [256, '9bce7f95f1f901bc95341a3161e4a0936aa74b658377b4b1d42ef1a149f35a86'],
  [300, '1663637de326e2b1710f966833b23df10c4c83638e459ad61bf1ae51a06a0342'],
];

const flipBit = (hex: string) => (parseInt(hex[0], 16) ^ 1).toString(16) + hex.slice(1);

describe('Synaptic Field root', () => {
  it('empty field root is SHA-256("cog-synaptic-v1" || 00000000)', () => {
    const f = new SynapticField();
    expect(f.size).toBe(0);
    expect(f.rootHex()).toBe('3b71eda108fdf5eaa3fb39f3807475ad3e7dcdcacb8fa58581f486586c3e5914');
    expect(() => f.proof(0)).toThrow(RangeError);
  });

  it('matches roots recomputed outside this codebase', () => {
    for (const [n, hex] of PINNED) expect(field(blocks(0, n)).rootHex(), `n=${n}`).toBe(hex);
  });

  it('equals the bagged-peaks construction, whose bag is the RFC 6962 root of the window', () => {
    for (const n of [0, 1, 2, 3, 4, 5, 7, 8, 100, 200, 255, 256]) {
      const hs = blocks(0, n);
      const f = field(hs);
      expect(f.rootHex(), `n=${n}`).toBe(toHex(peaksRoot(hs)));
      if (n > 0) expect(f.rootHex(), `n=${n}`).toBe(toHex(synapticRoot(n, merkleRoot(hs))));
    }
  });

  it('accepts hex block hashes and rejects anything that is not 32 bytes', () => {
    const hs = blocks(0, 3);
    const a = field(hs);
    const b = new SynapticField();
    for (const h of hs) b.append(toHex(h).toUpperCase());
    expect(b.rootHex()).toBe(a.rootHex());
    expect(() => a.append(new Uint8Array(31))).toThrow(RangeError);
    expect(() => a.append('ab')).toThrow(RangeError);
    expect(() => a.append('zz'.repeat(32))).toThrow(RangeError);
    expect(a.size).toBe(3);
  });

  it('root() and leaves() return copies', () => {
    const f = field(blocks(0, 4));
    const before = f.rootHex();
    f.root().fill(0);
    f.leaves()[0].fill(0);
    expect(f.rootHex()).toBe(before);
  });
});

describe('Synaptic Field proofs', () => {
  for (const n of [1, 2, 3, 7, 200, 256, 300]) {
    it(`every position verifies at ${n} appended blocks`, () => {
      const all = blocks(1000, n);
      const f = field(all);
      const window = all.slice(-SYNAPTIC_WINDOW);
      expect(f.size).toBe(Math.min(n, SYNAPTIC_WINDOW));
      const root = f.root();
      for (let i = 0; i < f.size; i++) {
        const p = f.proof(i);
        expect(p.leaf).toBe(toHex(window[i]));
        expect(p.index).toBe(i);
        expect(p.size).toBe(f.size);
        expect(p.hashes.length).toBe(synapticProofLength(i, f.size));
        expect(p.hashes.length).toBeLessThanOrEqual(SYNAPTIC_PROOF_HASHES);
        expect(verifySynapticProof(p, root), `n=${n} i=${i}`).toBe(true);
        expect(verifySynapticProof(p, toHex(root))).toBe(true);
      }
    });
  }

  it('documented proof lengths for small windows', () => {
    const lengths = (n: number) => Array.from({ length: n }, (_, i) => field(blocks(0, n)).proof(i).hashes.length);
    expect(lengths(1)).toEqual([0]);
    expect(lengths(3)).toEqual([2, 2, 1]);
    expect(lengths(7)).toEqual([3, 3, 3, 3, 3, 3, 2]);
  });

  it('a full window gives exactly 8 hashes for every leaf', () => {
    const f = field(blocks(0, 256));
    for (let i = 0; i < 256; i++) expect(f.proof(i).hashes.length).toBe(8);
    const after = field(blocks(0, 1000));
    for (let i = 0; i < 256; i++) expect(after.proof(i).hashes.length).toBe(8);
  });

  it('proves by block hash (bytes or hex) as well as by position', () => {
    const hs = blocks(0, 300);
    const f = field(hs);
    expect(f.proof(hs[299])).toEqual(f.proof(255));
    expect(f.proof(toHex(hs[100]))).toEqual(f.proof(100 - 44));
    expect(f.indexOf(hs[0])).toBe(-1); // evicted
    expect(f.indexOf('nope')).toBe(-1);
    expect(() => f.proof(hs[0])).toThrow(RangeError);
    expect(() => f.proof(256)).toThrow(RangeError);
    expect(() => f.proof(-1)).toThrow(RangeError);
  });

  it('tampered proofs do not verify', () => {
    for (const n of [2, 3, 7, 200, 256]) {
      const f = field(blocks(0, n));
      const root = f.root();
      const other = field(blocks(1, n)).root();
      for (const i of new Set([0, 1, Math.floor(n / 2), n - 1])) {
        const p = f.proof(i);
        const bad: [string, SynapticProof | null, Uint8Array | string][] = [
          ['wrong root', p, other],
          ['zero root', p, new Uint8Array(32)],
          ['short root', p, root.subarray(0, 31)],
          ['bad hex root', p, 'zz'.repeat(32)],
          ['wrong index', { ...p, index: (i + 1) % n }, root],
          ['index = size', { ...p, index: n }, root],
          ['negative index', { ...p, index: -1 }, root],
          ['wrong size', { ...p, size: n + 1 }, root],
          ['size 0', { ...p, size: 0 }, root],
          ['size > window', { ...p, size: 257 }, root],
          ['wrong leaf', { ...p, leaf: flipBit(p.leaf) }, root],
          ['short leaf', { ...p, leaf: p.leaf.slice(2) }, root],
          ['extra hash', { ...p, hashes: [...p.hashes, p.hashes[0] ?? toHex(root)] }, root],
          ['extra leading hash', { ...p, hashes: [toHex(root), ...p.hashes] }, root],
          ['missing hash', { ...p, hashes: p.hashes.slice(0, -1) }, root],
          ['not an array', { ...p, hashes: 'x' as unknown as string[] }, root],
          ['null', null, root],
        ];
        p.hashes.forEach((_, k) => {
          bad.push([`flipped bit in hash ${k}`, { ...p, hashes: p.hashes.map((h, j) => (j === k ? flipBit(h) : h)) }, root]);
          bad.push([`malformed hash ${k}`, { ...p, hashes: p.hashes.map((h, j) => (j === k ? h.slice(1) : h)) }, root]);
        });
        if (p.hashes.length > 1) bad.push(['swapped hashes', { ...p, hashes: [p.hashes[1], p.hashes[0], ...p.hashes.slice(2)] }, root]);
        for (const [name, proof, r] of bad) {
          expect(() => verifySynapticProof(proof as SynapticProof, r)).not.toThrow();
          expect(verifySynapticProof(proof as SynapticProof, r), `n=${n} i=${i}: ${name}`).toBe(false);
        }
      }
    }
  });

  it('an old proof fails once the window moved on', () => {
    const f = field(blocks(0, 256));
    const p = f.proof(10);
    f.append(blockHash(256));
    expect(verifySynapticProof(p, f.root())).toBe(false);
    expect(verifySynapticProof(f.proof(9), f.root())).toBe(true); // same block, shifted left
    expect(f.proof(9).leaf).toBe(p.leaf);
  });
});

describe('eviction and rebuild', () => {
  it('keeps the window at 256 and matches a fresh field over the last 256', () => {
    const all = blocks(0, 700);
    const f = new SynapticField();
    all.forEach((h, k) => {
      f.append(h);
      if (k === 299 || k === 699) {
        const last = all.slice(Math.max(0, k + 1 - SYNAPTIC_WINDOW), k + 1);
        expect(f.size).toBe(256);
        expect(f.leaves().map(toHex)).toEqual(last.map(toHex));
        expect(f.rootHex()).toBe(field(last).rootHex());
        expect(f.rootHex()).toBe(toHex(synapticRoot(256, merkleRoot(last))));
      }
    });
  });

  it('fromLeaves rebuilds from stored hashes, keeping only the last 256', () => {
    const all = blocks(0, 400);
    const f = field(all);
    expect(SynapticField.fromLeaves(all).rootHex()).toBe(f.rootHex());
    expect(SynapticField.fromLeaves(all.slice(-256).map(toHex)).rootHex()).toBe(f.rootHex());
    expect(SynapticField.fromLeaves(all.slice(0, 5)).rootHex()).toBe(field(all.slice(0, 5)).rootHex());
    expect(SynapticField.fromLeaves([]).rootHex()).toBe(new SynapticField().rootHex());
    expect(() => SynapticField.fromLeaves([fromHex('00')])).toThrow(RangeError);
  });
});
