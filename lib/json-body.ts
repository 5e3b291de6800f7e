// A reply's JSON body. Most replies are small: one JSON.stringify. A large one (a deep recall in
// Shape A: 1,000 memory nodes, 550 kB) is written in parts, one per element of its long arrays,
// into one Buffer. JSON.stringify's single string of that size is a V8 large object: flattening it
// and copying it to UTF-8 for the socket each take fresh pages, and their page faults cost about
// 2 ms a response on this machine (a 400 kB string: 1.3 ms to build, four of 100 kB: 0.05 ms).

/** Arrays at least this long are written an element at a time. */
const LONG_ARRAY = 200;

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof (v as { toJSON?: unknown }).toJSON === 'function') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** Elements stringified together: one call per run of them (a call per element cost 1.4 ms for 1,000 recall nodes), each run's text well under the large-object limit. */
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

/**
 * The parts of the JSON of a value whose long arrays sit at its top: the value itself, or a plain
 * object's members (the shape of every large reply here); null when it has none to split, so the
 * caller stringifies it whole. Members are written as JSON.stringify writes them: in key order, a
 * member with no JSON form left out.
 */
function topLevelParts(data: unknown): string[] | null {
  if (Array.isArray(data)) {
    if (data.length < LONG_ARRAY || typeof (data as { toJSON?: unknown }).toJSON === 'function') return null;
    const out: string[] = [];
    arrayParts(data, out);
    return out;
  }
  if (!isPlainObject(data)) return null;
  const keys = Object.keys(data);
  if (!keys.some((k) => Array.isArray(data[k]) && (data[k] as unknown[]).length >= LONG_ARRAY)) return null;
  const out: string[] = ['{'];
  let first = true;
  for (const k of keys) {
    const v = data[k];
    const long = Array.isArray(v) && v.length >= LONG_ARRAY && typeof (v as { toJSON?: unknown }).toJSON !== 'function';
    const json = long ? '' : JSON.stringify(v);
    if (json === undefined) continue;
    out.push(first ? '' : ',', JSON.stringify(k), ':');
    first = false;
    if (long) arrayParts(v as unknown[], out);
    else out.push(json);
  }
  out.push('}');
  return out;
}

/** The JSON of a reply: a string, or for one with long arrays at its top a Buffer of the same UTF-8 text. */
export function jsonBody(data: unknown): string | Buffer {
  const parts = topLevelParts(data);
  if (!parts) return JSON.stringify(data);
  let bytes = 0;
  for (const p of parts) bytes += Buffer.byteLength(p);
  const out = Buffer.allocUnsafe(bytes);
  let at = 0;
  for (const p of parts) at += out.write(p, at);
  return out;
}
