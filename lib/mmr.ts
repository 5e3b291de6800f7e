// The Synaptic Field: a Merkle Mountain Range over the last 256 Medulla block hashes.
//
// Construction (enough to recompute it without this code):
//
// * Window. The field holds the n <= 256 most recent block hashes b[0..n-1], oldest first; each
//   is 32 raw bytes. Appending a 257th hash evicts b[0] and renumbers the rest (index is a
//   position in the window, not a block height).
// * Hashes. SHA-256 with RFC 6962 domain separation:
//     leaf(b)    = SHA-256(0x00 || b)
//     node(l, r) = SHA-256(0x01 || l || r)
// * Peaks. Write n in binary, n = 2^h0 + 2^h1 + ... with h0 > h1 > ...; the window splits, oldest
//   first, into perfect subtrees ("mountains") of 2^h0, 2^h1, ... leaves, each hashed as a
//   perfect binary tree of node() over leaf() values.
// * Bag. Fold the peaks right to left: bag = P_last; for j = last-1 down to 0: bag = node(P_j, bag).
//   Bagging right to left makes `bag` exactly the RFC 6962 Merkle Tree Hash of b[0..n-1] (RFC 6962
//   splits at the largest power of two below n, i.e. after the first peak), so any RFC 9162 code
//   computes it. The empty window has no bag (zero bytes below).
// * Root. root = SHA-256(ASCII "cog-synaptic-v1" || uint32_be(n) || bag). Committing to n makes a
//   proof's (index, size) authenticated by the root alone: a bare RFC 6962 root does not bind the
//   tree size (a proof for leaf 0 of 3 also verifies as leaf 0 of 4), and there is no signed tree
//   head here to carry it. Empty field: root = SHA-256("cog-synaptic-v1" || 00 00 00 00).
//   The ASCII prefix mirrors the coherence root's "cog-coh-v1" and cannot be confused with a leaf
//   or node input (those start with 0x00 / 0x01).
// * Proofs. The proof for b[i] is the RFC 6962 audit path PATH(i, b[0..n-1]), bottom-up:
//   for b[i] in peak j (0-based from the oldest) of height h_j, it is the h_j siblings inside the
//   peak, then the bag of the peaks right of j (one hash, absent when j is the last peak), then
//   the peaks P_{j-1}, ..., P_0. Length = h_j + (j < last ? 1 : 0) + j, at most ceil(log2 n) <= 8.
//   With a full window (n = 256: one peak of height 8) every proof is exactly 8 hashes.
//   Examples: n = 1 -> 0 hashes; n = 3 -> 2 for b[0], b[1] and 1 for b[2]; n = 7 -> 3 for
//   b[0..5] and 2 for b[6].
// * Verification. Recompute the bag from (leaf, index = i, tree_size = n, hashes) with RFC 9162
//   2.1.3.2 (the proof length must be exactly the length above), then compare
//   SHA-256("cog-synaptic-v1" || uint32_be(n) || bag) with the root.

import { constantTimeEqual, fromHex, isHex, sha256, toHex } from './crypto.ts';
import { HASH_BYTES, inclusionProofFromLeafHashes, leafHash, merkleRootFromLeafHashes, rootFromInclusionProof } from './merkle.ts';

export const SYNAPTIC_WINDOW = 256;
export const SYNAPTIC_PROOF_HASHES = 8;
export const SYNAPTIC_ROOT_TAG = 'cog-synaptic-v1';
const TAG_BYTES = new TextEncoder().encode(SYNAPTIC_ROOT_TAG);

/** SHA-256("cog-synaptic-v1" || uint32_be(size) || bag), bag = RFC 6962 root of the window (none when empty). */
export function synapticRoot(size: number, bag: Uint8Array | null): Uint8Array {
  const buf = new Uint8Array(TAG_BYTES.byteLength + 4 + (bag ? bag.byteLength : 0));
  buf.set(TAG_BYTES, 0);
  new DataView(buf.buffer).setUint32(TAG_BYTES.byteLength, size, false);
  if (bag) buf.set(bag, TAG_BYTES.byteLength + 4);
  return sha256(buf);
}

export interface SynapticProof {
  /** The block hash being proven, 64 lowercase hex. */
  leaf: string;
  /** Position in the window, 0 = oldest. */
  index: number;
  /** Number of leaves in the window when the proof was made. */
  size: number;
  /** RFC 6962 audit path, bottom-up, 64 lowercase hex each. */
  hashes: string[];
}

type HashInput = Uint8Array | string;

function toBlockHash(h: HashInput): Uint8Array {
  if (typeof h === 'string') {
    if (!isHex(h, HASH_BYTES)) throw new RangeError('Synaptic Field: block hash must be 64 hex characters');
    return fromHex(h);
  }
  if (!(h instanceof Uint8Array) || h.byteLength !== HASH_BYTES) {
    throw new RangeError('Synaptic Field: block hash must be 32 bytes');
  }
  return new Uint8Array(h);
}

/** Length of PATH(index, n) in an RFC 6962 tree: one hash per level where the node has a sibling. */
export function synapticProofLength(index: number, size: number): number {
  let len = 0;
  let m = index;
  let n = size;
  while (n > 1) {
    if ((m ^ 1) < n) len++;
    m >>>= 1;
    n = (n + 1) >>> 1;
  }
  return len;
}

export class SynapticField {
  #leaves: Uint8Array[] = [];
  #leafHashes: Uint8Array[] = [];
  #root: Uint8Array | null = null;

  /** Rebuilds the field from stored block hashes (oldest first); only the last 256 are kept. */
  static fromLeaves(hashes: readonly HashInput[]): SynapticField {
    const field = new SynapticField();
    for (const h of hashes.slice(-SYNAPTIC_WINDOW)) field.append(h);
    return field;
  }

  get size(): number {
    return this.#leaves.length;
  }

  /** Appends a newly mined block hash, evicting the oldest beyond the 256-leaf window. */
  append(blockHash: HashInput): void {
    const b = toBlockHash(blockHash);
    this.#leaves.push(b);
    this.#leafHashes.push(leafHash(b));
    if (this.#leaves.length > SYNAPTIC_WINDOW) {
      this.#leaves.shift();
      this.#leafHashes.shift();
    }
    this.#root = null;
  }

  /** 32-byte root (see the header); cached until the next append. */
  root(): Uint8Array {
    if (!this.#root) {
      const n = this.#leafHashes.length;
      this.#root = synapticRoot(n, n ? merkleRootFromLeafHashes(this.#leafHashes) : null);
    }
    return new Uint8Array(this.#root);
  }

  rootHex(): string {
    return toHex(this.root());
  }

  /** Copies of the window's block hashes, oldest first. */
  leaves(): Uint8Array[] {
    return this.#leaves.map((l) => new Uint8Array(l));
  }

  /** Window position of a block hash (the newest occurrence), or -1. */
  indexOf(blockHash: HashInput): number {
    let b: Uint8Array;
    try {
      b = toBlockHash(blockHash);
    } catch {
      return -1;
    }
    for (let i = this.#leaves.length - 1; i >= 0; i--) {
      if (Buffer.compare(this.#leaves[i], b) === 0) return i;
    }
    return -1;
  }

  /** Inclusion proof by window position or by block hash. Throws RangeError if it is not in the window. */
  proof(at: number | HashInput): SynapticProof {
    const index = typeof at === 'number' ? at : this.indexOf(at);
    if (!Number.isInteger(index) || index < 0 || index >= this.#leaves.length) {
      throw new RangeError('Synaptic Field: leaf not in the window');
    }
    return {
      leaf: toHex(this.#leaves[index]),
      index,
      size: this.#leaves.length,
      hashes: inclusionProofFromLeafHashes(this.#leafHashes, index).map(toHex),
    };
  }
}

/** Checks a Synaptic Field proof against a root (bytes or hex). Never throws. */
export function verifySynapticProof(proof: SynapticProof, root: Uint8Array | string): boolean {
  try {
    if (proof === null || typeof proof !== 'object') return false;
    const { leaf, index, size, hashes } = proof;
    if (!isHex(leaf, HASH_BYTES) || !Array.isArray(hashes)) return false;
    if (!Number.isInteger(size) || size < 1 || size > SYNAPTIC_WINDOW) return false;
    if (!Number.isInteger(index) || index < 0 || index >= size) return false;
    if (hashes.length !== synapticProofLength(index, size)) return false;
    if (!hashes.every((h) => isHex(h, HASH_BYTES))) return false;
    const rootBytes = typeof root === 'string' ? (isHex(root, HASH_BYTES) ? fromHex(root) : null) : root;
    if (!(rootBytes instanceof Uint8Array) || rootBytes.byteLength !== HASH_BYTES) return false;
    const bag = rootFromInclusionProof(fromHex(leaf), index, size, hashes.map(fromHex));
    return bag !== null && constantTimeEqual(synapticRoot(size, bag), rootBytes);
  } catch {
    return false;
  }
}
