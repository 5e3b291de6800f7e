// Signed requests (COG_AUTH=required), the scheme of docs/security.md, in browser-safe code
// (@noble/ed25519 and @noble/hashes, no node:crypto):
//   message = METHOD "\n" PATH (with its query, as sent) "\n" sha256hex(body bytes) "\n" TIMESTAMP
//   headers x-cog-stack, x-cog-timestamp (Unix ms), x-cog-signature (128 lowercase hex)
// A signed message is accepted once, so every attempt of a retried request is signed anew.
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';

// noble's synchronous API needs a SHA-512; keep one another module (the platform's own) set.
if (!ed.hashes.sha512) ed.hashes.sha512 = sha512;

const utf8 = new TextEncoder();

/** A stack's signing key: its id and the 32-byte ed25519 seed (`identityPriv`, 64 hex). */
export interface StackKey {
  stackId: string;
  identityPriv: string;
}

export function signingMessage(method: string, path: string, body: string, timestamp: string): string {
  return `${method.toUpperCase()}\n${path}\n${bytesToHex(sha256(utf8.encode(body)))}\n${timestamp}`;
}

/** The three headers that sign one request (`body` is the exact text sent, "" when none). */
export function signedHeaders(key: StackKey, method: string, path: string, body: string, now = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(now));
  const signature = ed.sign(utf8.encode(signingMessage(method, path, body, timestamp)), hexToBytes(key.identityPriv));
  return { 'x-cog-stack': key.stackId, 'x-cog-timestamp': timestamp, 'x-cog-signature': bytesToHex(signature) };
}

/** The 64-hex public key of a seed (what the platform stores as the stack's pubKey). */
export function publicKeyOf(identityPriv: string): string {
  return bytesToHex(ed.getPublicKey(hexToBytes(identityPriv)));
}

/** A fresh key pair for a Shape B stack (the client holds the key; the platform never sees it). */
export function generateKeyPair(): { pubkey: string; identityPriv: string } {
  const seed = ed.utils.randomSecretKey();
  return { pubkey: bytesToHex(ed.getPublicKey(seed)), identityPriv: bytesToHex(seed) };
}
