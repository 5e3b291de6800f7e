// Client-side checks: bad input is refused before it leaves the client, with a CogInputError that
// names the field. The rules are the platform's own (docs/decisions.md), so what passes here is
// only refused by the platform for a reason it alone can know (an unknown id, too few tokens).
import { CogInputError } from './errors.ts';

export const SLEEVE_KINDS = ['human', 'ai', 'mining', 'memory'] as const;
export type SleeveKind = (typeof SLEEVE_KINDS)[number];
export const CPV_KEYS = ['syncCoeff', 'memoryCoeff', 'computeCoeff', 'residueCoeff', 'routingCoeff'] as const;
export const MAX_DEPTH = 10_000;
export const MIN_TICK_RATE_MS = 100;
export const MAX_TICK_RATE_MS = 86_400_000;
const MAX_ID = 500;
const MAX_TEXT = 512 * 1024;
const HEX64 = /^[0-9a-f]{64}$/;

const fail = (field: string, message: string): never => {
  throw new CogInputError(field, message);
};

export function object(field: string, v: unknown): Record<string, unknown> {
  if (!v || typeof v !== 'object' || Array.isArray(v)) fail(field, 'must be an object');
  return v as Record<string, unknown>;
}

/** An id of the given prefix (`stack:`, `sleeve:`, ...), as the platform issues them. */
export function id(field: string, v: unknown, prefix?: string): string {
  if (typeof v !== 'string' || v.length === 0) return fail(field, 'must be a non-empty string');
  if (v.length > MAX_ID) fail(field, `must be at most ${MAX_ID} characters`);
  if (/\s/.test(v)) fail(field, 'must not contain whitespace');
  if (prefix && !v.startsWith(prefix)) fail(field, `must be an id starting with "${prefix}" (got ${JSON.stringify(v.slice(0, 40))})`);
  return v;
}

export const stackId = (field: string, v: unknown) => id(field, v, 'stack:');
export const sleeveId = (field: string, v: unknown) => id(field, v, 'sleeve:');

export function optional<T>(v: unknown, check: (v: unknown) => T): T | undefined {
  return v === undefined || v === null ? undefined : check(v);
}

export function text(field: string, v: unknown, { allowEmpty = true } = {}): string {
  if (typeof v !== 'string') return fail(field, 'must be a string');
  if (!allowEmpty && v.length === 0) fail(field, 'must not be empty');
  if (v.length > MAX_TEXT) fail(field, `must be at most ${MAX_TEXT} characters`);
  if (v.includes('\u0000')) fail(field, 'must not contain a NUL character');
  return v;
}

export function int(field: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) return fail(field, 'must be an integer');
  if (v < min || v > max) fail(field, `must be from ${min} to ${max}`);
  return v;
}

export function num(field: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) return fail(field, 'must be a finite number');
  if (v < min || v > max) fail(field, `must be from ${min} to ${max}`);
  return v;
}

export function bool(field: string, v: unknown): boolean {
  if (typeof v !== 'boolean') return fail(field, 'must be true or false');
  return v;
}

export function kind(field: string, v: unknown): SleeveKind {
  if (typeof v !== 'string' || !(SLEEVE_KINDS as readonly string[]).includes(v)) return fail(field, `must be one of ${SLEEVE_KINDS.join(', ')}`);
  return v as SleeveKind;
}

export function tickRate(field: string, v: unknown): number {
  const n = int(field, v, 0, MAX_TICK_RATE_MS);
  if (n > 0 && n < MIN_TICK_RATE_MS) fail(field, `must be 0 (event-driven) or from ${MIN_TICK_RATE_MS} to ${MAX_TICK_RATE_MS} ms`);
  return n;
}

export function hex64(field: string, v: unknown): string {
  if (typeof v !== 'string' || !HEX64.test(v)) return fail(field, 'must be 64 lowercase hex characters');
  return v;
}

/** A CPV: each coefficient a number in [0, 2]; `complete` requires all five (Shape B). */
export function cpv(field: string, v: unknown, complete: boolean): Record<string, number> {
  const o = object(field, v);
  for (const k of Object.keys(o)) if (!(CPV_KEYS as readonly string[]).includes(k)) fail(`${field}.${k}`, `is not a CPV coefficient (${CPV_KEYS.join(', ')})`);
  const out: Record<string, number> = {};
  for (const k of CPV_KEYS) {
    if (o[k] === undefined) {
      if (complete) fail(`${field}.${k}`, 'is required');
      continue;
    }
    out[k] = num(`${field}.${k}`, o[k], 0, 2);
  }
  return out;
}

/** A resume cursor: the digits of the last event's cursor or seq. */
export function cursor(field: string, v: unknown): string {
  const s = typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? String(v) : v;
  if (typeof s !== 'string' || !/^\d{1,15}$/.test(s)) return fail(field, 'must be a cursor received from the platform (digits)');
  return s;
}

export const SAGA_ID = /^needle:[0-9a-f]{16,64}$/;

/** Event-stream subject filters as the bus takes them: cog. then tokens, * or (last) >. */
export function subjects(field: string, v: unknown): string[] {
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.length === 0 || list.length > 32) return fail(field, 'must be 1 to 32 subject filters');
  list.forEach((s, i) => {
    const f = `${field}[${i}]`;
    if (typeof s !== 'string' || s.length > 200) fail(f, 'must be a string of at most 200 characters');
    const tokens = (s as string).split('.');
    const ok =
      tokens.length >= 2 && tokens[0] === 'cog' && tokens.every((t, j) => /^[A-Za-z0-9_:-]+$/.test(t) || t === '*' || (t === '>' && j === tokens.length - 1));
    if (!ok) fail(f, 'must be cog. then dot-separated tokens, each a name, * or (last) >, e.g. cog.perceive.*');
  });
  return list as string[];
}
