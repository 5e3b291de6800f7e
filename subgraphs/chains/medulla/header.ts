// The Medulla block header: canonical encoding, proof-of-work hash and target.
//
// Encoding (244 bytes, integers big-endian), hashed as blockHash = SHA-256(SHA-256(header)):
//   off   0  u32  version (1)
//   off   4  32   prevHash
//   off  36  u64  height
//   off  44  u64  epoch (= height)
//   off  52  u64  difficulty
//   off  60  u64  tsMs (Unix ms; the Block's ts is floor(tsMs / 1000))
//   off  68  32   crossRoot
//   off 100  32   evmRoot
//   off 132  32   ipfsRoot
//   off 164  32   sleevesRoot
//   off 196  u64  coherenceEpoch (epoch of the committed tuple; 2^64-1 when none)
//   off 204  32   synapticFieldRoot
//   off 236  u64  nonce
// The nonce sits last so the miner rewrites only the tail of one buffer.
// PoW: the hash, read as a 256-bit big-endian integer, must be <= floor((2^256 - 1) / difficulty).

import { createHash } from 'node:crypto';

export const HEADER_VERSION = 1;
export const HEADER_BYTES = 244;
export const TS_OFFSET = 60;
export const NONCE_OFFSET = 236;
export const ZERO_HASH = '0'.repeat(64);
const NO_EPOCH = 0xffffffffffffffffn;
const MAX_256 = (1n << 256n) - 1n;

export interface BlockHeader {
  prevHash: string;
  height: number;
  epoch: number;
  difficulty: number;
  tsMs: number;
  crossRoot: string;
  evmRoot: string;
  ipfsRoot: string;
  sleevesRoot: string;
  /** Epoch of the coherence tuple committed here; null when none (roots all zeros). */
  coherenceEpoch: number | null;
  synapticFieldRoot: string;
  nonce: number;
}

/** The spec's Block object plus the header fields needed to check it. */
export interface Block extends BlockHeader {
  blockHash: string;
  /** Unix seconds. */
  ts: number;
}

export function encodeHeader(h: BlockHeader): Buffer {
  const b = Buffer.alloc(HEADER_BYTES);
  b.writeUInt32BE(HEADER_VERSION, 0);
  b.write(h.prevHash, 4, 32, 'hex');
  b.writeBigUInt64BE(BigInt(h.height), 36);
  b.writeBigUInt64BE(BigInt(h.epoch), 44);
  b.writeBigUInt64BE(BigInt(h.difficulty), 52);
  b.writeBigUInt64BE(BigInt(h.tsMs), TS_OFFSET);
  b.write(h.crossRoot, 68, 32, 'hex');
  b.write(h.evmRoot, 100, 32, 'hex');
  b.write(h.ipfsRoot, 132, 32, 'hex');
  b.write(h.sleevesRoot, 164, 32, 'hex');
  b.writeBigUInt64BE(h.coherenceEpoch === null ? NO_EPOCH : BigInt(h.coherenceEpoch), 196);
  b.write(h.synapticFieldRoot, 204, 32, 'hex');
  b.writeBigUInt64BE(BigInt(h.nonce), NONCE_OFFSET);
  return b;
}

export function hashHeader(h: BlockHeader): string {
  const first = createHash('sha256').update(encodeHeader(h)).digest();
  return createHash('sha256').update(first).digest('hex');
}

export function targetOf(difficulty: number): bigint {
  return MAX_256 / BigInt(difficulty);
}

/** Target as 32 big-endian bytes, for Buffer.compare in the miner. */
export function targetBytes(difficulty: number): Buffer {
  return Buffer.from(targetOf(difficulty).toString(16).padStart(64, '0'), 'hex');
}

export function meetsTarget(hashHex: string, difficulty: number): boolean {
  return BigInt('0x' + hashHex) <= targetOf(difficulty);
}

export function toBlock(h: BlockHeader): Block {
  return { blockHash: hashHeader(h), ts: Math.floor(h.tsMs / 1000), ...h };
}

/** Field order of the spec's Block first, then the header extras. */
export function blockJson(b: Block): Block {
  return {
    blockHash: b.blockHash,
    height: b.height,
    epoch: b.epoch,
    difficulty: b.difficulty,
    ts: b.ts,
    crossRoot: b.crossRoot,
    evmRoot: b.evmRoot,
    ipfsRoot: b.ipfsRoot,
    sleevesRoot: b.sleevesRoot,
    synapticFieldRoot: b.synapticFieldRoot,
    prevHash: b.prevHash,
    nonce: b.nonce,
    tsMs: b.tsMs,
    coherenceEpoch: b.coherenceEpoch,
  };
}
