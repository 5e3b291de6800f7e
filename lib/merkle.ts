// RFC 6962 / RFC 9162 Merkle trees over SHA-256, as the coherence root requires:
//
//   MTH({})        = SHA-256()                              (the empty string)
//   MTH({d0})      = SHA-256(0x00 || d0)                    leaf hash
//   MTH(D[n])      = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])), k = largest power of two < n
//
// The root is computed bottom-up (pair neighbours, carry an unpaired last node up a level), which
// builds exactly the left-balanced RFC 6962 tree. Inclusion proofs are RFC 6962 PATH(m, D[n]),
// ordered from the leaf's sibling up to the root's child; verification is RFC 9162 2.1.3.2.

import { createHash, hash as oneShotHash } from 'node:crypto';
import { asU8, constantTimeEqual } from './crypto.ts';

export const HASH_BYTES = 32;

const hasOneShot = typeof oneShotHash === 'function';

function digest(input: Uint8Array): Buffer {
  return hasOneShot ? oneShotHash('sha256', input, 'buffer') : createHash('sha256').update(input).digest();
}

// Hot path. Intermediate hashes are kept as 32-char latin1 strings, not Buffers: every Buffer
// owns an ArrayBuffer, and allocating 200,000 of them costs more than the hashing itself
// (measured ~2x on a 100k-leaf fold). Each hash is one copy into a reused scratch buffer plus one
// native call.
type Bin = string;

const NODE_SCRATCH = Buffer.alloc(1 + 2 * HASH_BYTES);
NODE_SCRATCH[0] = 0x01;
const LEAF_SCRATCH = Buffer.alloc(4096);
const LEAF_SCRATCH_32 = LEAF_SCRATCH.subarray(0, 1 + HASH_BYTES);
const LEAF_PREFIX = new Uint8Array([0x00]);

// Buffer#latin1Write is undocumented but present in every Node release we target and ~1.5x faster
// than write(s, off, len, 'latin1'); fall back when it is missing.
type Latin1Writer = (this: Buffer, s: string, offset: number, length: number) => number;
const latin1Write: Latin1Writer | undefined = (Buffer.prototype as unknown as { latin1Write?: Latin1Writer }).latin1Write;
const writeBin: (buf: Buffer, s: Bin, offset: number) => void = latin1Write
  ? (buf, s, offset) => void latin1Write.call(buf, s, offset, HASH_BYTES)
  : (buf, s, offset) => void buf.write(s, offset, HASH_BYTES, 'latin1');

// 'binary' is Node's alias of 'latin1' (the only spelling the digest typings accept).
function hashBin(input: Uint8Array): Bin {
  return hasOneShot ? oneShotHash('sha256', input, 'binary') : createHash('sha256').update(input).digest('binary');
}

function leafBin(data: Uint8Array): Bin {
  if (data.byteLength < LEAF_SCRATCH.byteLength) {
    LEAF_SCRATCH[0] = 0x00;
    LEAF_SCRATCH.set(data, 1);
    return hashBin(data.byteLength === HASH_BYTES ? LEAF_SCRATCH_32 : LEAF_SCRATCH.subarray(0, 1 + data.byteLength));
  }
  return createHash('sha256').update(LEAF_PREFIX).update(data).digest('binary');
}

function nodeBin(left: Bin, right: Bin): Bin {
  writeBin(NODE_SCRATCH, left, 1);
  writeBin(NODE_SCRATCH, right, 1 + HASH_BYTES);
  return hashBin(NODE_SCRATCH);
}

function toBin(h: Uint8Array): Bin {
  return Buffer.from(h.buffer, h.byteOffset, h.byteLength).toString('latin1');
}

function fromBin(s: Bin): Uint8Array {
  const out = new Uint8Array(HASH_BYTES);
  writeBin(Buffer.from(out.buffer), s, 0);
  return out;
}

function checkHash(h: unknown, what: string): asserts h is Uint8Array {
  if (!(h instanceof Uint8Array) || h.byteLength !== HASH_BYTES) throw new RangeError(`${what}: expected 32 bytes`);
}

/** SHA-256(0x00 || data). */
export function leafHash(data: Uint8Array): Uint8Array {
  if (!(data instanceof Uint8Array)) throw new TypeError('leafHash: expected bytes');
  return fromBin(leafBin(data));
}

/** SHA-256(0x01 || left || right), both 32 bytes. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  checkHash(left, 'nodeHash left');
  checkHash(right, 'nodeHash right');
  return fromBin(nodeBin(toBin(left), toBin(right)));
}

/** Root of the empty tree: SHA-256 of the empty string (RFC 6962 2.1). A fresh copy each call. */
export function emptyRoot(): Uint8Array {
  return asU8(digest(new Uint8Array(0)));
}

/** Replaces level[0..n) by the next level up, in place; returns its length. */
function foldLevel(level: Bin[], n: number): number {
  let w = 0;
  for (let r = 0; r + 1 < n; r += 2) level[w++] = nodeBin(level[r], level[r + 1]);
  if (n & 1) level[w++] = level[n - 1];
  return w;
}

function rootOf(level: Bin[]): Uint8Array {
  let n = level.length;
  while (n > 1) n = foldLevel(level, n);
  return fromBin(level[0]);
}

function leafBins(hashes: readonly Uint8Array[]): Bin[] {
  const level = new Array<Bin>(hashes.length);
  for (let i = 0; i < hashes.length; i++) {
    checkHash(hashes[i], `leaf hash ${i}`);
    level[i] = toBin(hashes[i]);
  }
  return level;
}

/** RFC 6962 Merkle Tree Hash of raw entries (each hashed as a leaf). */
export function merkleRoot(leaves: readonly Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return emptyRoot();
  const level = new Array<Bin>(leaves.length);
  for (let i = 0; i < leaves.length; i++) level[i] = leafBin(leaves[i]);
  return rootOf(level);
}

/**
 * RFC 6962 Merkle Tree Hash of `n` entries whose data are 32-byte digests the caller computed as
 * latin1 ('binary') strings, e.g. `hash('sha256', x, 'binary')`: entry i's data is `digestAt(i)`
 * (each still gets the 0x00 leaf prefix). Same root as `merkleRoot` over those digests as bytes,
 * without a Buffer per entry (a Buffer digest costs ~3x a 'binary' one on Node 20).
 */
export function merkleRootOfBinaryDigests(n: number, digestAt: (i: number) => string): Uint8Array {
  if (n === 0) return emptyRoot();
  const level = new Array<Bin>(n);
  LEAF_SCRATCH_32[0] = 0x00;
  for (let i = 0; i < n; i++) {
    const d = digestAt(i);
    if (d.length !== HASH_BYTES) throw new RangeError(`digest ${i}: expected 32 latin1 characters`);
    writeBin(LEAF_SCRATCH_32, d, 1);
    level[i] = hashBin(LEAF_SCRATCH_32);
  }
  return rootOf(level);
}

/** RFC 6962 Merkle Tree Hash from already computed leaf hashes (32 bytes each). */
export function merkleRootFromLeafHashes(hashes: readonly Uint8Array[]): Uint8Array {
  if (hashes.length === 0) return emptyRoot();
  return rootOf(leafBins(hashes));
}

function pathOf(level: Bin[], index: number): Uint8Array[] {
  const path: Uint8Array[] = [];
  let n = level.length;
  let m = index;
  while (n > 1) {
    const sibling = m ^ 1;
    // An unpaired last node has no sibling at this level: it is carried up and adds nothing to PATH.
    if (sibling < n) path.push(fromBin(level[sibling]));
    n = foldLevel(level, n);
    m >>>= 1;
  }
  return path;
}

function checkIndex(index: number, size: number): void {
  if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
    throw new RangeError(`inclusionProof: index ${index} outside a tree of ${size}`);
  }
}

/** RFC 6962 PATH(index, D[n]) from leaf hashes: siblings from the bottom up. */
export function inclusionProofFromLeafHashes(hashes: readonly Uint8Array[], index: number): Uint8Array[] {
  checkIndex(index, hashes.length);
  return pathOf(leafBins(hashes), index);
}

/** RFC 6962 PATH(index, D[n]) for raw entries. */
export function inclusionProof(leaves: readonly Uint8Array[], index: number): Uint8Array[] {
  checkIndex(index, leaves.length);
  return pathOf(leaves.map(leafBin), index);
}

/** A leaf given by its precomputed hash rather than its data. */
export interface LeafHashRef {
  leafHash: Uint8Array;
}

/**
 * RFC 9162 2.1.3.2: the root implied by an inclusion proof, or null when the proof cannot be for
 * (index, treeSize) (wrong length, non-32-byte hashes, index >= treeSize). Never throws.
 */
export function rootFromInclusionProof(leaf: Uint8Array | LeafHashRef, index: number, treeSize: number, proof: readonly Uint8Array[]): Uint8Array | null {
  try {
    if (!Number.isSafeInteger(index) || !Number.isSafeInteger(treeSize) || index < 0 || index >= treeSize) return null;
    if (!Array.isArray(proof)) return null;
    let r: Bin;
    if (leaf instanceof Uint8Array) r = leafBin(leaf);
    else if (leaf && leaf.leafHash instanceof Uint8Array && leaf.leafHash.byteLength === HASH_BYTES) r = toBin(leaf.leafHash);
    else return null;
    // Division instead of >>> so sizes above 2^32 stay correct.
    let fn = index;
    let sn = treeSize - 1;
    for (const p of proof) {
      if (!(p instanceof Uint8Array) || p.byteLength !== HASH_BYTES) return null;
      if (sn === 0) return null;
      if (fn % 2 === 1 || fn === sn) {
        r = nodeBin(toBin(p), r);
        while (fn % 2 === 0 && fn !== 0) {
          fn /= 2;
          sn = Math.floor(sn / 2);
        }
      } else {
        r = nodeBin(r, toBin(p));
      }
      fn = Math.floor(fn / 2);
      sn = Math.floor(sn / 2);
    }
    return sn === 0 ? fromBin(r) : null;
  } catch {
    return null;
  }
}

/**
 * RFC 9162 2.1.3.2 inclusion verification. `leaf` is the raw entry, or `{ leafHash }`. Never throws:
 * malformed input (bad sizes, non-32-byte hashes, index >= treeSize, wrong proof length) is false.
 * As in RFC 6962 the root does not commit to treeSize by itself: take the size from a trusted
 * source (a signed tree head, a block header) alongside the root.
 */
export function verifyInclusion(leaf: Uint8Array | LeafHashRef, index: number, treeSize: number, proof: readonly Uint8Array[], root: Uint8Array): boolean {
  if (!(root instanceof Uint8Array) || root.byteLength !== HASH_BYTES) return false;
  const computed = rootFromInclusionProof(leaf, index, treeSize, proof);
  return computed !== null && constantTimeEqual(computed, root);
}

/** One change to a MerkleLeafSet: the key's leaf data (a 32-byte digest as a latin1 string), or null to remove it. */
export interface LeafChange {
  key: string;
  data: string | null;
}

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * An ordered set of leaves (ascending by key, compared as JS strings compare) whose RFC 6962
 * root is kept up to date instead of recomputed: the root is exactly `merkleRoot` over the leaves'
 * data in key order. Each leaf data is a 32-byte digest given as a latin1 ('binary') string.
 *
 * The tree caches every complete aligned subtree (level j, index i covers leaves [i·2^j,
 * (i+1)·2^j)); RFC 6962's root over n leaves is the right fold of the perfect subtrees of n's binary
 * digits, highest first, so `root()` costs O(log n) hashes. A batch of changes re-hashes only the
 * subtrees at or right of its leftmost changed position p: O(n − p) node hashes (no leaf is hashed
 * again), O(log n) when leaves are only appended, nothing when the batch changes nothing. A change
 * in the middle shifts every later leaf, and RFC 6962's split points are positional, so the subtrees
 * right of it are new hash inputs: no exact construction re-hashes fewer.
 */
export class MerkleLeafSet {
  private keys: string[] = [];
  /** levels[0]: leaf hashes; levels[j][i]: the aligned subtree of 2^j leaves at index i. */
  private levels: Bin[][] = [[]];
  private cachedRoot: Uint8Array | null = null;

  get size(): number {
    return this.keys.length;
  }

  has(key: string): boolean {
    return this.leafAt(key) !== undefined;
  }

  /** Replaces the whole set (the last entry of a key wins). */
  reset(entries: Iterable<{ key: string; data: string }>): void {
    this.keys = [];
    this.levels = [[]];
    this.cachedRoot = null;
    this.apply([...entries]);
  }

  /**
   * Applies a batch (the last change of a key wins; removing an absent key and re-adding a key with
   * its present data change nothing). Returns the leftmost position the batch changed, or -1.
   */
  apply(changes: readonly LeafChange[]): number {
    const last = new Map<string, string | null>();
    for (const c of changes) {
      if (c.data !== null && c.data.length !== HASH_BYTES) throw new RangeError(`leaf ${c.key}: expected a 32-character latin1 digest`);
      last.set(c.key, c.data);
    }
    const effective: { key: string; leaf: Bin | null }[] = [];
    for (const [key, data] of last) {
      const had = this.leafAt(key);
      if (data === null) {
        if (had !== undefined) effective.push({ key, leaf: null });
        continue;
      }
      const leaf = leafOfDigest(data);
      if (had !== leaf) effective.push({ key, leaf });
    }
    if (effective.length === 0) return -1;
    effective.sort((a, b) => byCodeUnits(a.key, b.key));
    const from = this.lowerBound(effective[0].key);
    // Merge the changes into the keys and leaves from `from` on.
    const oldKeys = this.keys;
    const oldLeaves = this.levels[0];
    const keys = oldKeys.slice(0, from);
    const leaves = oldLeaves.slice(0, from);
    let i = from;
    for (const c of effective) {
      while (i < oldKeys.length && oldKeys[i] < c.key) {
        keys.push(oldKeys[i]);
        leaves.push(oldLeaves[i]);
        i++;
      }
      if (i < oldKeys.length && oldKeys[i] === c.key) i++; // replaced or removed
      if (c.leaf !== null) {
        keys.push(c.key);
        leaves.push(c.leaf);
      }
    }
    for (; i < oldKeys.length; i++) {
      keys.push(oldKeys[i]);
      leaves.push(oldLeaves[i]);
    }
    this.keys = keys;
    this.levels[0] = leaves;
    this.rehashFrom(from);
    this.cachedRoot = null;
    return from;
  }

  /** The RFC 6962 root over the leaves in key order (sha256("") when empty). A fresh copy. */
  root(): Uint8Array {
    if (!this.cachedRoot) this.cachedRoot = this.computeRoot();
    return this.cachedRoot.slice();
  }

  /** Every key, ascending (a copy). */
  keyList(): string[] {
    return [...this.keys];
  }

  private leafAt(key: string): Bin | undefined {
    const i = this.lowerBound(key);
    return i < this.keys.length && this.keys[i] === key ? this.levels[0][i] : undefined;
  }

  private lowerBound(key: string): number {
    let lo = 0;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.keys[mid] < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Recomputes the cached subtrees that cover a leaf at or after position `from`. */
  private rehashFrom(from: number): void {
    const n = this.keys.length;
    let j = 1;
    for (let width = 2; width <= n; width *= 2, j++) {
      const below = this.levels[j - 1];
      const level = this.levels[j] ?? (this.levels[j] = []);
      const count = Math.floor(n / width);
      const start = Math.floor(from / width);
      level.length = Math.min(level.length, start);
      for (let i = level.length; i < count; i++) level.push(nodeBin(below[2 * i], below[2 * i + 1]));
    }
    this.levels.length = j;
  }

  private computeRoot(): Uint8Array {
    const n = this.keys.length;
    if (n === 0) return emptyRoot();
    // The perfect subtrees of n's binary digits, highest first, each aligned at the sum of those before.
    const blocks: Bin[] = [];
    let offset = 0;
    for (let j = this.levels.length - 1; j >= 0; j--) {
      const width = 2 ** j;
      if (Math.floor(n / width) % 2 === 1) {
        blocks.push(this.levels[j][offset / width]);
        offset += width;
      }
    }
    let acc = blocks[blocks.length - 1];
    for (let k = blocks.length - 2; k >= 0; k--) acc = nodeBin(blocks[k], acc);
    return fromBin(acc);
  }
}

function leafOfDigest(d: string): Bin {
  LEAF_SCRATCH_32[0] = 0x00;
  writeBin(LEAF_SCRATCH_32, d, 1);
  return hashBin(LEAF_SCRATCH_32);
}
