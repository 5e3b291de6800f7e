// Proof-of-work search, off the event loop (worker_thread). Plain JS so it loads in any runner.
// A job is a 244-byte header (see header.ts); the worker rewrites tsMs (>= minTsMs) at each slice
// and the nonce at the tail, and hashes SHA-256(SHA-256(header)) until the hash <= target.
// Background jobs hash for sliceMs then sleep so the duty cycle stays at `duty`; full jobs only
// yield to the event loop between slices (to see a newer job or a cancel).
//
// The hashing is @noble/hashes' SHA-256 from a midstate, into buffers made once per slice. The
// nonce sits in the header's last 64-byte block and tsMs changes only per slice, so the first three
// blocks are hashed once a slice and a nonce costs two compressions. Node's one-shot hash() made two
// Buffers a nonce, each a malloc'd backing store swept by V8's helper threads: 4.3 us of CPU a
// nonce, a tenth of it hashing; this loop takes 1.2 us (bench/miner.ts). miner.test.ts checks its
// solutions against hashHeader.
import { parentPort } from 'node:worker_threads';
import { sha256 } from '@noble/hashes/sha2.js';

const TS_OFFSET = 60;
const NONCE_OFFSET = 236;
/** Bytes before the block that holds the nonce (3 x 64). */
const MIDSTATE_BYTES = 192;
let job = null;
let running = false;

function writeU64(buf, off, v) {
  buf.writeUInt32BE(Math.floor(v / 4294967296), off);
  buf.writeUInt32BE(v >>> 0, off + 4);
}

/** a <= b, both 32 bytes read as big-endian integers. */
function atMost(a, b) {
  for (let i = 0; i < 32; i++) if (a[i] !== b[i]) return a[i] < b[i];
  return true;
}

function slice(j) {
  const buf = j.header;
  const ts = Math.max(Date.now(), j.minTsMs);
  writeU64(buf, TS_OFFSET, ts);
  const target = j.target;
  const start = performance.now();
  const mid = sha256.create().update(buf.subarray(0, MIDSTATE_BYTES));
  const tail = buf.subarray(MIDSTATE_BYTES);
  const fresh = sha256.create();
  const inner = sha256.create();
  const outer = sha256.create();
  const first = new Uint8Array(32);
  const h = new Uint8Array(32);
  let nonce = j.nonce;
  for (;;) {
    for (let i = 0; i < 1024; i++) {
      writeU64(buf, NONCE_OFFSET, nonce);
      mid._cloneInto(inner).update(tail).digestInto(first);
      fresh._cloneInto(outer).update(first).digestInto(h);
      if (atMost(h, target)) {
        j.hashes += i + 1;
        return { nonce, tsMs: ts, hash: Buffer.from(h).toString('hex') };
      }
      nonce++;
    }
    j.hashes += 1024;
    j.nonce = nonce;
    if (performance.now() - start >= j.sliceMs) return null;
  }
}

const pause = (ms) => new Promise((r) => (ms > 0 ? setTimeout(r, ms) : setImmediate(r)));

async function run() {
  running = true;
  while (job) {
    const j = job;
    const found = slice(j);
    if (found) {
      parentPort.postMessage({ type: 'found', id: j.id, ...found, hashes: j.hashes });
      if (job === j) job = null;
      continue;
    }
    if (j.stopAfterMs && performance.now() - j.startedAt >= j.stopAfterMs) {
      parentPort.postMessage({ type: 'exhausted', id: j.id, hashes: j.hashes, elapsedMs: performance.now() - j.startedAt });
      if (job === j) job = null;
      continue;
    }
    await pause(j.full ? 0 : Math.round((j.sliceMs * (1 - j.duty)) / j.duty));
  }
  running = false;
}

parentPort.on('message', (m) => {
  if (m.type === 'job') {
    job = {
      id: m.id,
      header: Buffer.from(m.header),
      target: Buffer.from(m.target),
      minTsMs: m.minTsMs,
      nonce: m.nonce,
      full: m.full,
      sliceMs: m.sliceMs,
      duty: m.duty,
      stopAfterMs: m.stopAfterMs ?? 0,
      hashes: 0,
      startedAt: performance.now(),
    };
    if (!running) void run();
  } else if (m.type === 'cancel') {
    job = null;
  }
});
