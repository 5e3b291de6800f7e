// Signed gateway requests (COG_AUTH=required): the message both sides build, and the client helper
// that turns a stack's identityPriv into the three headers. The server side is router/auth.ts; the
// scheme is written down in docs/security.md.
//
//   message = METHOD "\n" PATH (with its query string, as sent) "\n" sha256hex(body bytes, "" when none) "\n" TIMESTAMP
//   x-cog-stack: <stackId>   x-cog-timestamp: <Unix ms>   x-cog-signature: <ed25519 signature, 128 lowercase hex>
import { createHash } from 'node:crypto';
import { sign } from './crypto.ts';

export const HEADER_STACK = 'x-cog-stack';
export const HEADER_TIMESTAMP = 'x-cog-timestamp';
export const HEADER_SIGNATURE = 'x-cog-signature';

/** The signed text; `body` is the body's exact bytes (a string is taken as UTF-8). */
export function signingMessage(method: string, path: string, body: string | Uint8Array, timestamp: string): string {
  const hash = createHash('sha256')
    .update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
    .digest('hex');
  return `${method.toUpperCase()}\n${path}\n${hash}\n${timestamp}`;
}

export interface SignRequestInput {
  method: string;
  /** Path and query exactly as they go on the wire, e.g. `/v1/sleeves/sleeve%3Aai%3A1%3Aab/perceive`. */
  path: string;
  /** The body text sent; an object is signed as JSON.stringify(body), so send exactly that text. */
  body?: string | object | null;
  stackId: string;
  /** The stack's 32-byte ed25519 seed (64 hex), `identityPriv` of the creation response. */
  identityPriv: string;
  /** Clock for the timestamp, Unix ms (default Date.now()). */
  now?: number;
}

export type SignedHeaders = { 'x-cog-stack': string; 'x-cog-timestamp': string; 'x-cog-signature': string };

/** The body text signRequest signs for a given body value. */
export function bodyText(body: SignRequestInput['body']): string {
  if (body === undefined || body === null) return '';
  return typeof body === 'string' ? body : JSON.stringify(body);
}

/** Headers that make one request acceptable to a gateway with COG_AUTH=required (once: replays are refused). */
export function signRequest(input: SignRequestInput): SignedHeaders {
  const timestamp = String(Math.floor(input.now ?? Date.now()));
  const message = signingMessage(input.method, input.path, bodyText(input.body), timestamp);
  return {
    [HEADER_STACK]: input.stackId,
    [HEADER_TIMESTAMP]: timestamp,
    [HEADER_SIGNATURE]: sign(new TextEncoder().encode(message), input.identityPriv),
  } as SignedHeaders;
}
