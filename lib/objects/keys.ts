// Object keys: relative paths of [A-Za-z0-9._/-], checked the same way by every adapter so that no
// key can leave the store's root (no `..`, no absolute path, no empty or `.` segment).

const KEY_CHARS = /^[A-Za-z0-9._/-]+$/;
const MAX_KEY = 1024;

export class InvalidObjectKeyError extends Error {
  constructor(key: unknown, why: string) {
    super(`invalid object key ${JSON.stringify(String(key)).slice(0, 200)}: ${why}`);
    this.name = 'InvalidObjectKeyError';
  }
}

function checkPath(value: string, kind: string, allowPartialLast: boolean): void {
  if (typeof value !== 'string') throw new InvalidObjectKeyError(value, `${kind} must be a string`);
  if (value.length > MAX_KEY) throw new InvalidObjectKeyError(value, `longer than ${MAX_KEY} characters`);
  if (!KEY_CHARS.test(value)) throw new InvalidObjectKeyError(value, 'only A-Z a-z 0-9 . _ / - are allowed');
  if (value.startsWith('/')) throw new InvalidObjectKeyError(value, 'absolute paths are not allowed');
  const segments = value.split('/');
  segments.forEach((s, i) => {
    const last = i === segments.length - 1;
    if (s === '..') throw new InvalidObjectKeyError(value, '".." segments are not allowed');
    if (last && allowPartialLast) return; // a prefix may end mid-segment or with "/"
    if (s === '' || s === '.') throw new InvalidObjectKeyError(value, 'empty or "." segments are not allowed');
  });
}

export function assertObjectKey(key: string): void {
  if (key === '') throw new InvalidObjectKeyError(key, 'must not be empty');
  checkPath(key, 'key', false);
}

/** A list prefix: like a key, but may be empty, end with "/", or stop inside a segment. */
export function assertObjectPrefix(prefix: string): void {
  if (prefix === '') return;
  checkPath(prefix, 'prefix', true);
}
