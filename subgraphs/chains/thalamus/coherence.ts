// The coherence root, exactly (docs/coherence.md says the same, for third parties):
//
//   evmRoot     = MTH( leaves: the 32 bytes of each Cortex transaction hash of the epoch that
//                 touches the contract suite, sorted ascending by lowercase hex, duplicates removed )
//   ipfsRoot    = MTH( leaves: sha256(utf8(cid)) (32 bytes) of each Hippocampus write of the epoch,
//                 in write order )
//   sleevesRoot = MTH( leaves: sha256(utf8(type) || utf8(id)) (32 bytes, no separator) of each
//                 alive sleeve at fold time, sorted ascending by id )
//   btcRoot     = 32 zero bytes (reserved)
//   crossRoot   = sha256( ascii "cog-coh-v1" || evmRoot || btcRoot || ipfsRoot || sleevesRoot )
//
// MTH is the RFC 6962 Merkle Tree Hash over SHA-256 (leaf = sha256(0x00 || data), node =
// sha256(0x01 || l || r)); the empty list hashes to sha256("") =
// e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.
// The tuple an operator signs: ascii "cog-coh-submit-v1" || u64be(epoch) || crossRoot || evmRoot ||
// ipfsRoot || sleevesRoot (raw bytes), ed25519.

import { hash as oneShot } from 'node:crypto';
import { fromHex, isHex, toHex, utf8 } from '../../../lib/crypto.ts';
import { merkleRoot, merkleRootOfBinaryDigests } from '../../../lib/merkle.ts';

export const COHERENCE_TAG = 'cog-coh-v1';
export const SUBMIT_TAG = 'cog-coh-submit-v1';
export const ZERO_ROOT = '0'.repeat(64);
export const BTC_ROOT = ZERO_ROOT;

export interface CoherenceTuple {
  epoch: number;
  crossRoot: string;
  evmRoot: string;
  ipfsRoot: string;
  sleevesRoot: string;
}

export interface FoldInput {
  /** Cortex tx hashes (0x-prefixed or bare, any case). */
  evmTxHashes: readonly string[];
  /** CIDs of the epoch's DAG writes, in write order. */
  cids: readonly string[];
  /** Alive sleeves. */
  sleeves: readonly { type: string; id: string }[];
}

export interface Roots {
  evmRoot: string;
  ipfsRoot: string;
  sleevesRoot: string;
  btcRoot: string;
  crossRoot: string;
}

const sha = (b: Uint8Array | string): Buffer => oneShot('sha256', b, 'buffer') as Buffer;
/** sha256 of utf8(s) as a 32-character latin1 string ('binary' is Node's alias of latin1). */
const shaBin = (s: string): string => oneShot('sha256', s, 'binary') as string;

function normTxHash(h: string): string {
  const bare = h.startsWith('0x') || h.startsWith('0X') ? h.slice(2) : h;
  if (!isHex(bare, 32)) throw new RangeError(`evm tx hash must be 32 bytes of hex, got ${JSON.stringify(h)}`);
  return bare.toLowerCase();
}

export function evmRootOf(txHashes: readonly string[]): string {
  const sorted = [...new Set(txHashes.map(normTxHash))].sort();
  return toHex(merkleRoot(sorted.map((h) => fromHex(h))));
}

export function ipfsRootOf(cids: readonly string[]): string {
  // Hot path (100,000 writes an epoch): leaf data is sha256(utf8(cid)), taken as a latin1 string and
  // leaf-hashed in the same pass, so no Buffer is allocated per write.
  return toHex(merkleRootOfBinaryDigests(cids.length, (i) => shaBin(cids[i])));
}

export function sleevesRootOf(sleeves: readonly { type: string; id: string }[]): string {
  const sorted = [...sleeves].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return toHex(merkleRoot(sorted.map((s) => sha(s.type + s.id))));
}

/** sha256("cog-coh-v1" || evmRoot || btcRoot || ipfsRoot || sleevesRoot). */
export function crossRootOf(evmRoot: string, ipfsRoot: string, sleevesRoot: string, btcRoot = BTC_ROOT): string {
  const buf = Buffer.concat([Buffer.from(COHERENCE_TAG, 'ascii'), ...[evmRoot, btcRoot, ipfsRoot, sleevesRoot].map((h) => Buffer.from(h, 'hex'))]);
  return sha(buf).toString('hex');
}

export function computeRoots(input: FoldInput): Roots {
  return rootsWithSleevesRoot(input, sleevesRootOf(input.sleeves));
}

/** The roots of a fold whose sleevesRoot its source computed (kept incrementally: flows/thalamus-sources.ts). */
export function rootsWithSleevesRoot(input: Omit<FoldInput, 'sleeves'>, sleevesRoot: string): Roots {
  const evmRoot = evmRootOf(input.evmTxHashes);
  const ipfsRoot = ipfsRootOf(input.cids);
  return { evmRoot, ipfsRoot, sleevesRoot, btcRoot: BTC_ROOT, crossRoot: crossRootOf(evmRoot, ipfsRoot, sleevesRoot) };
}

/** The leaf data of a sleeve: sha256(utf8(type) || utf8(id)), as a 32-character latin1 string. */
export function sleeveLeafData(type: string, id: string): string {
  return shaBin(type + id);
}

/** The bytes an operator signs for a tuple. */
export function tupleMessage(t: CoherenceTuple): Uint8Array {
  const head = utf8(SUBMIT_TAG);
  const out = new Uint8Array(head.length + 8 + 128);
  out.set(head, 0);
  new DataView(out.buffer).setBigUint64(head.length, BigInt(t.epoch), false);
  [t.crossRoot, t.evmRoot, t.ipfsRoot, t.sleevesRoot].forEach((h, i) => out.set(fromHex(h), head.length + 8 + 32 * i));
  return out;
}

/** True for the all-zeros tuple of a block without a commitment. */
export function isEmptyTuple(t: { crossRoot: string; evmRoot: string; ipfsRoot: string; sleevesRoot: string }): boolean {
  return t.crossRoot === ZERO_ROOT && t.evmRoot === ZERO_ROOT && t.ipfsRoot === ZERO_ROOT && t.sleevesRoot === ZERO_ROOT;
}
