// EIP-1559 (type 2) transactions signed without ethers' Transaction. The submitter signs every Cortex
// call here (an epoch's settlement, its stacks' heads, its anchor and emission): ethers turns the
// call data between hex and bytes several times a signature (per-byte loops), and its signature of
// a 32-stack `updateStacks` (7 kB of data) with the hash took 9-10 ms and was a fifth of what the
// platform allocated under the perceive bench. Here the data is decoded once and the RLP built in
// buffers; keccak-256 and secp256k1 (RFC 6979, low s) are the noble libraries ethers itself uses, so
// the bytes are the ones ethers signs (test/cortex.sign.test.ts compares them): 2.1-3.3 ms, most of
// it the two keccaks (0.4 ms each) and the signature (0.8 ms).
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { fromHex } from '../../../lib/crypto.ts';

export interface Eip1559Fields {
  chainId: number | bigint;
  nonce: number;
  maxPriorityFeePerGas: bigint;
  maxFeePerGas: bigint;
  gasLimit: bigint;
  /** 0x-prefixed 20-byte address. */
  to: string;
  value: bigint;
  /** 0x-prefixed hex call data. */
  data: string;
}

export interface SignedTx {
  /** The signed transaction, 0x-prefixed hex (eth_sendRawTransaction's argument). */
  raw: string;
  /** Its hash (keccak-256 of the raw bytes), lowercase hex without 0x. */
  hash: string;
}

/** 0x-prefixed hex as bytes, decoded by the kernel's strict decoder (no regex pass over the call data). */
function hexBytes(hex: string, what: string, length?: number): Uint8Array {
  let b: Uint8Array | undefined;
  try {
    if (typeof hex === 'string' && hex.startsWith('0x')) b = fromHex(hex.slice(2));
  } catch {
    // odd length or a non-hex digit: refused below
  }
  if (!b) throw new TypeError(`${what} must be 0x-prefixed hex bytes`);
  if (length !== undefined && b.length !== length) throw new TypeError(`${what} must be ${length} bytes`);
  return b;
}

/** A big-endian integer's bytes without their leading zeros (RLP's form of an integer). */
function minimal(b: Uint8Array): Uint8Array {
  let i = 0;
  while (i < b.length && b[i] === 0) i++;
  return b.subarray(i);
}

/** An unsigned integer as RLP wants it: big-endian, no leading zero bytes (zero is empty). */
function uintBytes(v: number | bigint, what: string): Buffer {
  const n = BigInt(v);
  if (n < 0n) throw new RangeError(`${what} must not be negative`);
  if (n === 0n) return Buffer.alloc(0);
  const hex = n.toString(16);
  return Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
}

/** The header of an RLP string (offset 0x80) or list (0xc0) of `length` bytes. */
function header(length: number, offset: 0x80 | 0xc0): Buffer {
  if (length <= 55) return Buffer.from([offset + length]);
  const len = uintBytes(length, 'length');
  return Buffer.concat([Buffer.from([offset + 55 + len.length]), len]);
}

/** One RLP string item. */
function rlpString(b: Uint8Array): Uint8Array {
  if (b.length === 1 && b[0]! < 0x80) return b;
  return Buffer.concat([header(b.length, 0x80), b]);
}

/** The RLP list of already encoded items. */
function rlpList(items: Uint8Array[]): Buffer {
  const body = Buffer.concat(items);
  return Buffer.concat([header(body.length, 0xc0), body]);
}

/** The type-2 payload's fields before the signature, each RLP-encoded (an empty access list). */
function unsignedItems(tx: Eip1559Fields): Uint8Array[] {
  return [
    rlpString(uintBytes(tx.chainId, 'chainId')),
    rlpString(uintBytes(tx.nonce, 'nonce')),
    rlpString(uintBytes(tx.maxPriorityFeePerGas, 'maxPriorityFeePerGas')),
    rlpString(uintBytes(tx.maxFeePerGas, 'maxFeePerGas')),
    rlpString(uintBytes(tx.gasLimit, 'gasLimit')),
    rlpString(hexBytes(tx.to, 'to', 20)),
    rlpString(uintBytes(tx.value, 'value')),
    rlpString(hexBytes(tx.data, 'data')),
    rlpList([]),
  ];
}

const TYPE_2 = Buffer.from([2]);

/** Signs a type-2 transaction with a 32-byte secp256k1 key (0x-prefixed hex). */
export function signEip1559(tx: Eip1559Fields, privateKey: string): SignedTx {
  const key = hexBytes(privateKey, 'privateKey', 32);
  const items = unsignedItems(tx);
  const digest = keccak_256(Buffer.concat([TYPE_2, rlpList(items)]));
  // [recovery, r (32), s (32)]
  const sig = secp256k1.sign(digest, key, { prehash: false, lowS: true, format: 'recovered' });
  const signed = Buffer.concat([
    TYPE_2,
    rlpList([...items, rlpString(uintBytes(sig[0]!, 'yParity')), rlpString(minimal(sig.subarray(1, 33))), rlpString(minimal(sig.subarray(33, 65)))]),
  ]);
  return { raw: `0x${signed.toString('hex')}`, hash: Buffer.from(keccak_256(signed)).toString('hex') };
}
