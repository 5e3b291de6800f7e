// The crypto kernel: SHA-256, hex, ed25519 identities, HKDF-SHA512 epoch keys, AES-256-GCM sealing
// and secret wrapping. node:crypto does the heavy lifting (ed25519 keys and signing included);
// @noble/ed25519 verifies, with RFC 8032's strict decoding.
// No function here logs or puts key material into an error message.

import * as ed from '@noble/ed25519';
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  hash as oneShotHash,
  hkdfSync,
  randomFillSync,
  sign as nodeSign,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';

export type Bytes = Uint8Array;
export type BytesLike = Uint8Array | string;

/** A Buffer (or any Uint8Array subclass) as a plain Uint8Array over the same memory. */
export function asU8(b: Uint8Array): Uint8Array {
  return b.constructor === Uint8Array ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** Strict UTF-8 decode: throws on invalid sequences instead of inserting U+FFFD. */
export function fromUtf8(b: Uint8Array): string {
  return decoder.decode(b);
}

function bytesOf(data: BytesLike): Uint8Array {
  return typeof data === 'string' ? utf8(data) : data;
}

// ---------------------------------------------------------------------------------------------
// Hex

export function toHex(b: Uint8Array): string {
  return asBuffer(b).toString('hex');
}

/**
 * Strict hex decode (either case). Buffer's hex decoder stops at the first non-hex digit (documented
 * truncation), so a short write count is how bad input shows up; no regex pass over the string.
 */
export function fromHex(hex: string): Uint8Array {
  if (typeof hex !== 'string') throw new TypeError('hex: expected a string');
  if (hex.length % 2 !== 0) throw new RangeError('hex: odd length');
  // Own ArrayBuffer (not Buffer's shared pool), written in place by the native decoder.
  const out = new Uint8Array(hex.length / 2);
  if (Buffer.from(out.buffer).write(hex, 'hex') !== out.length) throw new RangeError('hex: invalid character');
  return out;
}

/** Like fromHex but returns a Buffer (may sit in Buffer's pool) or null instead of throwing. Internal hot paths. */
function hexToBufferOrNull(hex: string): Buffer | null {
  if (hex.length % 2 !== 0) return null;
  const b = Buffer.from(hex, 'hex');
  return b.length * 2 === hex.length ? b : null;
}

const HEX_RE = /^[0-9a-fA-F]*$/;

/** True when s is hex of exactly `bytes` bytes (any case). */
export function isHex(s: unknown, bytes?: number): s is string {
  return typeof s === 'string' && s.length % 2 === 0 && (bytes === undefined || s.length === bytes * 2) && HEX_RE.test(s);
}

// ---------------------------------------------------------------------------------------------
// SHA-256 / SHA-512

// crypto.hash (Node >= 20.12) skips the Hash object: roughly 2x faster than createHash for small inputs.
const hasOneShot = typeof oneShotHash === 'function';

export function sha256(data: BytesLike): Uint8Array {
  const input = bytesOf(data);
  return asU8(hasOneShot ? oneShotHash('sha256', input, 'buffer') : createHash('sha256').update(input).digest());
}

export function sha256Hex(data: BytesLike): string {
  const input = bytesOf(data);
  return hasOneShot ? oneShotHash('sha256', input, 'hex') : createHash('sha256').update(input).digest('hex');
}

function sha512(data: Uint8Array): Uint8Array<ArrayBuffer> {
  const b = hasOneShot ? oneShotHash('sha512', data, 'buffer') : createHash('sha512').update(data).digest();
  return new Uint8Array(b.buffer as ArrayBuffer, b.byteOffset, b.byteLength);
}

// ---------------------------------------------------------------------------------------------
// ed25519 (RFC 8032). Keys and signatures through node:crypto (OpenSSL): noble's first key
// derivation builds its base-point tables, about a quarter of a second at start. Signatures are
// deterministic, so both give the same bytes. Verification stays with noble (synchronous, with
// native SHA-512 plugged in) for its strict decoding.

ed.hashes.sha512 = sha512;

/** PKCS#8 DER of an ed25519 private key is this prefix and the 32-byte seed. */
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');

function privateKeyOf(seed: Uint8Array): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, seed]), format: 'der', type: 'pkcs8' });
}

function publicKeyBytes(seed: Uint8Array): Uint8Array {
  // SPKI DER of an ed25519 key ends with the 32-byte public key.
  const spki = createPublicKey(privateKeyOf(seed)).export({ format: 'der', type: 'spki' });
  return asU8(spki.subarray(spki.length - 32));
}

// RFC 8032 strict decoding (not ZIP-215): rejects non-canonical points and s >= L, so a message has
// one valid encoding per signature, which matters when signatures end up in logs or as ids.
const VERIFY_OPTS = { zip215: false } as const;

export interface Identity {
  /** 32-byte ed25519 public key, lowercase hex. */
  pubKey: string;
  /** 32-byte ed25519 secret seed (RFC 8032 private key), lowercase hex. */
  identityPriv: string;
}

export function generateIdentity(): Identity {
  const seed = randomSecret(32);
  return { pubKey: toHex(publicKeyBytes(seed)), identityPriv: toHex(seed) };
}

function seedBytes(seedHex: string): Uint8Array {
  if (!isHex(seedHex, 32)) throw new RangeError('ed25519 seed: expected 64 hex characters');
  return fromHex(seedHex);
}

export function publicKeyFromSeed(seedHex: string): string {
  return toHex(publicKeyBytes(seedBytes(seedHex)));
}

/** Deterministic ed25519 signature (RFC 8032), 128 lowercase hex. */
export function sign(message: BytesLike, seedHex: string): string {
  return toHex(asU8(nodeSign(null, bytesOf(message), privateKeyOf(seedBytes(seedHex)))));
}

/** Never throws: malformed hex, wrong lengths or invalid points are simply `false`. */
export function verify(sigHex: string, message: BytesLike, pubKeyHex: string): boolean {
  try {
    if (!isHex(sigHex, 64) || !isHex(pubKeyHex, 32)) return false;
    if (typeof message !== 'string' && !(message instanceof Uint8Array)) return false;
    return ed.verify(fromHex(sigHex), bytesOf(message), fromHex(pubKeyHex), VERIFY_OPTS);
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Randomness and comparisons

export function randomSecret(bytes = 32): Uint8Array {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > 65536) throw new RangeError('randomSecret: 1..65536 bytes');
  return randomFillSync(new Uint8Array(bytes));
}

/** Constant time for equal lengths; different lengths return false at once (length is not secret). */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (!(a instanceof Uint8Array) || !(b instanceof Uint8Array)) return false;
  if (a.byteLength !== b.byteLength) return false;
  return timingSafeEqual(a, b);
}

// ---------------------------------------------------------------------------------------------
// HKDF-SHA512 (RFC 5869) and per-epoch keys

/** RFC 5869 HKDF with HMAC-SHA512. Empty salt means HashLen zero bytes (RFC 5869 2.2). */
export function hkdfSha512(ikm: Uint8Array, salt: Uint8Array, info: Uint8Array, length: number): Uint8Array {
  return new Uint8Array(hkdfSync('sha512', ikm, salt, info, length));
}

export const EPOCH_KEY_SALT = 'cog-epoch-key-v1';
const EPOCH_KEY_SALT_BYTES = utf8(EPOCH_KEY_SALT);

/**
 * The per-epoch AES-256-GCM key of a stack, re-derivable by anyone holding the master secret:
 *
 *   key = HKDF-SHA512(IKM  = masterSecret,
 *                     salt = UTF-8("cog-epoch-key-v1"),
 *                     info = UTF-8(stackId) || 0x00 || ASCII(decimal epoch, no sign, no leading zeros),
 *                     L    = 32)
 *
 * e.g. stackId "stk_1", epoch 42 -> info = 73 74 6b 5f 31 00 34 32. HKDF as in RFC 5869 (extract
 * with HMAC-SHA512(salt, IKM), then expand). The 0x00 separator keeps ("a1", 2) apart from ("a", 12).
 */
export function epochKey(masterSecret: Uint8Array, stackId: string, epoch: number): Uint8Array {
  if (!(masterSecret instanceof Uint8Array) || masterSecret.byteLength < 16) {
    throw new RangeError('epochKey: master secret must be at least 16 bytes');
  }
  if (typeof stackId !== 'string' || stackId.length === 0 || stackId.includes('\x00')) {
    throw new RangeError('epochKey: stackId must be a non-empty string without NUL');
  }
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw new RangeError('epochKey: epoch must be a non-negative integer');
  return new Uint8Array(hkdfSync('sha512', masterSecret, EPOCH_KEY_SALT_BYTES, utf8(`${stackId}\x00${epoch}`), 32));
}

// ---------------------------------------------------------------------------------------------
// AES-256-GCM

/** The ciphertext object of a Memory node: 12-byte iv, ciphertext || 16-byte tag, both lowercase hex. */
export interface Sealed {
  iv: string;
  ct: string;
  v: 1;
}

/** Any failure to open: bad tag, wrong key or aad, malformed object. Deliberately says nothing more. */
export class DecryptError extends Error {
  constructor(message = 'decryption failed') {
    super(message);
    this.name = 'DecryptError';
  }
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** ciphertext || tag as hex, straight from the cipher's output (no concat of buffers). */
function gcmEncryptHex(key: Uint8Array, iv: Uint8Array, plaintext: Uint8Array, aad?: Uint8Array): string {
  const c = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  if (aad) c.setAAD(aad);
  const body = c.update(plaintext);
  const tail = c.final(); // always empty for GCM; kept for correctness
  return body.toString('hex') + (tail.length ? tail.toString('hex') : '') + c.getAuthTag().toString('hex');
}

function gcmDecrypt(key: Uint8Array, iv: Uint8Array, ctAndTag: Uint8Array, aad?: Uint8Array): Uint8Array {
  if (key.byteLength !== KEY_BYTES || iv.byteLength !== IV_BYTES || ctAndTag.byteLength < TAG_BYTES) {
    throw new DecryptError();
  }
  const split = ctAndTag.byteLength - TAG_BYTES;
  try {
    const d = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    d.setAuthTag(ctAndTag.subarray(split));
    if (aad) d.setAAD(aad);
    const body = d.update(ctAndTag.subarray(0, split));
    const tail = d.final(); // throws on a bad tag
    return asU8(tail.length ? Buffer.concat([body, tail]) : body);
  } catch {
    throw new DecryptError();
  }
}

function checkKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.byteLength !== KEY_BYTES) throw new RangeError('AES-256-GCM: key must be 32 bytes');
}

/**
 * seal with a caller-chosen iv. For test vectors and re-derivation checks only: reusing an iv under
 * one key breaks GCM completely. Production code calls seal().
 */
export function sealWithIv(key: Uint8Array, iv: Uint8Array, plaintext: BytesLike, aad?: Uint8Array): Sealed {
  checkKey(key);
  if (!(iv instanceof Uint8Array) || iv.byteLength !== IV_BYTES) throw new RangeError('AES-256-GCM: iv must be 12 bytes');
  return { iv: toHex(iv), ct: gcmEncryptHex(key, iv, bytesOf(plaintext), aad), v: 1 };
}

/**
 * Fresh random bytes cut from one buffer of the CSPRNG's output, each slice handed out once: a
 * randomFillSync call per 12-byte iv cost more than the encryption itself (1.3% of the platform's
 * CPU under the perceive bench, `bench/perceive.ts --profile`), and a randomBytes(8) per shadow
 * branch id as much again under the embedded bench (17 sleeves on one stack: a branch a write).
 */
const POOL_BYTES = 6144;
let pool = new Uint8Array(0);
let poolAt = 0;
function pooledRandom(bytes: number): Uint8Array {
  if (poolAt + bytes > pool.byteLength) {
    pool = randomFillSync(new Uint8Array(POOL_BYTES));
    poolAt = 0;
  }
  const out = pool.subarray(poolAt, poolAt + bytes);
  poolAt += bytes;
  return out;
}
const freshIv = () => pooledRandom(IV_BYTES);

/** `bytes` (1..64) fresh random bytes as hex, for ids made on a hot path (a shadow branch, a residue). */
export function randomHex(bytes: number): string {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > 64) throw new RangeError('randomHex: 1..64 bytes');
  return toHex(pooledRandom(bytes));
}

/** AES-256-GCM with a fresh random 96-bit iv. */
export function seal(key: Uint8Array, plaintext: BytesLike, aad?: Uint8Array): Sealed {
  return sealWithIv(key, freshIv(), plaintext, aad);
}

/** Opens a Sealed object. Throws DecryptError on any failure, including a malformed object. */
export function open(key: Uint8Array, sealed: Sealed, aad?: Uint8Array): Uint8Array {
  if (!(key instanceof Uint8Array) || sealed === null || typeof sealed !== 'object' || sealed.v !== 1) {
    throw new DecryptError();
  }
  const { iv, ct } = sealed;
  if (typeof iv !== 'string' || typeof ct !== 'string' || iv.length !== IV_BYTES * 2 || ct.length < TAG_BYTES * 2) {
    throw new DecryptError();
  }
  const ivBytes = hexToBufferOrNull(iv);
  const ctBytes = hexToBufferOrNull(ct);
  if (!ivBytes || !ctBytes) throw new DecryptError();
  return gcmDecrypt(key, ivBytes, ctBytes, aad);
}

// ---------------------------------------------------------------------------------------------
// Wrapping stack master secrets at rest

const WRAP_PREFIX = 'v1';

/**
 * Seals a secret under a key-encryption key: `v1.<iv hex>.<ciphertext||tag hex>`, AES-256-GCM with
 * aad = UTF-8(label). The label (e.g. the stack id) binds the blob to its owner, so a wrapped
 * secret copied onto another row does not unwrap there.
 */
export function wrapSecret(kek: Uint8Array, secret: Uint8Array, label: string): string {
  checkKey(kek);
  const s = sealWithIv(kek, randomSecret(IV_BYTES), secret, utf8(label));
  return `${WRAP_PREFIX}.${s.iv}.${s.ct}`;
}

export function unwrapSecret(kek: Uint8Array, wrapped: string, label: string): Uint8Array {
  if (typeof wrapped !== 'string' || typeof label !== 'string') throw new DecryptError();
  const parts = wrapped.split('.');
  if (parts.length !== 3 || parts[0] !== WRAP_PREFIX) throw new DecryptError();
  return open(kek, { iv: parts[1], ct: parts[2], v: 1 }, utf8(label));
}
