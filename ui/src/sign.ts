// Signed GraphQL writes for a gateway with COG_AUTH=required, in the browser: the scheme of
// lib/sign.ts and docs/security.md (METHOD \n PATH \n sha256hex(body) \n TIMESTAMP, ed25519 by the
// stack key). Keys live in this module's memory only: never stored, never sent; a reload forgets them.
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';

ed.hashes.sha512 = sha512;

const keys = new Map<string, Uint8Array>();
const listeners = new Set<() => void>();

export const HEX64 = /^[0-9a-f]{64}$/;

/** The public key (64 hex) of a 32-byte seed (64 hex). */
export const publicKeyOf = (seedHex: string): string => bytesToHex(ed.getPublicKey(hexToBytes(seedHex)));

export function addKey(stackId: string, seedHex: string): void {
  keys.set(stackId, hexToBytes(seedHex));
  listeners.forEach((l) => l());
}
export function forgetKey(stackId: string): void {
  keys.get(stackId)?.fill(0);
  keys.delete(stackId);
  listeners.forEach((l) => l());
}
export const keyStacks = (): string[] => [...keys.keys()];
export const hasKey = (stackId: string): boolean => keys.has(stackId);
export function onKeysChanged(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

/** The three headers that make one request acceptable (once: the gateway refuses replays). */
export function signHeaders(stackId: string, method: string, path: string, body: string, now = Date.now()): Record<string, string> {
  const seed = keys.get(stackId);
  if (!seed) throw new Error(`no key for ${stackId}`);
  const ts = String(Math.floor(now));
  const message = `${method.toUpperCase()}\n${path}\n${bytesToHex(sha256(new TextEncoder().encode(body)))}\n${ts}`;
  return { 'x-cog-stack': stackId, 'x-cog-timestamp': ts, 'x-cog-signature': bytesToHex(ed.sign(new TextEncoder().encode(message), seed)) };
}
