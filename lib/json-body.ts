// A reply's JSON body. Most replies are small: one JSON.stringify. A large one (a deep recall in
// Shape A: 1,000 memory nodes, 550 kB) is written in parts, runs of the elements of its long
// arrays, into one Buffer. JSON.stringify's single string of that size is a V8 large object:
// flattening it and copying it to UTF-8 for the socket each take fresh pages, and their page faults
// cost about 2 ms a response on this machine (a 400 kB string: 1.3 ms to build, four of 100 kB:
// 0.05 ms). The HTTP layer (lib/http.ts) and the GraphQL routes (router/gateway.ts) answer with it.

/** Arrays at least this long are written in runs of their elements. */
const LONG_ARRAY = 200;

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof (v as { toJSON?: unknown }).toJSON === 'function') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/**
 * Elements stringified together: one call per run (a call per element cost 1.4 ms for 1,000 recall
 * nodes), each run's text well under the large-object limit.
 */
const RUN = 64;

/** An array's JSON as parts: the brackets, and runs of its elements as JSON.stringify writes them in an array. */
function arrayParts(a: readonly unknown[], out: string[]): void {
  out.push('[');
  for (let i = 0; i < a.length; i += RUN) {
    if (i) out.push(',');
    // A run's own array brackets dropped; undefined, functions and symbols are null in it, as in the whole.
    const run = JSON.stringify(a.slice(i, i + RUN));
    out.push(run.slice(1, -1));
  }
  out.push(']');
}

/** How deep in plain objects a long array is looked for (a GraphQL result's: data.recall.fragments). */
const MAX_NESTING = 4;

const isLongArray = (v: unknown): v is unknown[] => Array.isArray(v) && v.length >= LONG_ARRAY && typeof (v as { toJSON?: unknown }).toJSON !== 'function';

/** Whether a long array sits in the value, itself or down its plain objects' members: the value is written in parts. */
function holdsLongArray(v: unknown, depth: number): boolean {
  if (isLongArray(v)) return true;
  if (depth >= MAX_NESTING || !isPlainObject(v)) return false;
  for (const k of Object.keys(v)) if (holdsLongArray(v[k], depth + 1)) return true;
  return false;
}

/**
 * The JSON of a value that holdsLongArray() says is written in parts: a long array in runs, a plain object
 * member by member (as JSON.stringify writes them: in key order, a member with no JSON form left
 * out), the members that hold no long array whole.
 */
function valueParts(v: unknown, depth: number, out: string[]): void {
  if (isLongArray(v)) {
    arrayParts(v, out);
    return;
  }
  const o = v as Record<string, unknown>;
  out.push('{');
  let first = true;
  for (const k of Object.keys(o)) {
    const m = o[k];
    const inParts = holdsLongArray(m, depth + 1);
    const whole = inParts ? '' : JSON.stringify(m);
    if (whole === undefined) continue; // no JSON form: left out, as JSON.stringify leaves it out
    out.push(first ? '' : ',', JSON.stringify(k), ':');
    first = false;
    if (inParts) valueParts(m, depth + 1, out);
    else out.push(whole);
  }
  out.push('}');
}

/** The JSON of a reply: a string, or for one that holds a long array a Buffer of the same UTF-8 text. */
export function jsonBody(data: unknown): string | Buffer {
  if (!holdsLongArray(data, 0)) return JSON.stringify(data);
  const parts: string[] = [];
  valueParts(data, 0, parts);
  let bytes = 0;
  for (const p of parts) bytes += Buffer.byteLength(p);
  const out = Buffer.allocUnsafe(bytes);
  let at = 0;
  for (const p of parts) at += out.write(p, at);
  return out;
}
