// PGlite's engine in its own thread (lib/db/pglite-thread.ts is the other half). PostgreSQL compiled
// to WASM, and the file system calls it makes, run here, off the platform's event loop; the
// platform's thread keeps the protocol work (serialising, parsing, PGlite's locks) and hands each
// batch of wire-protocol messages here to run.
//
// The hand-over is shared memory, not postMessage: a call is a few hundred bytes each way, and a
// message through a MessagePort (serialised, queued, the receiving loop woken, a MessageEvent made)
// cost more than the engine's own work on a small insert (the thread's profile: postMessage alone
// 10% of it). The batch goes in `buffer`, `control` says whose turn it is; this thread sleeps in
// Atomics.wait until a batch comes, runs it synchronously (PGlite's execProtocolRawSync: NodeFS and
// the in-memory file system have nothing to sync after), writes the answer back into `buffer` and
// wakes the other side. An answer larger than `buffer` comes in a new, larger buffer passed on
// `port` (control[GROWN] says so), which both sides use from then on.
// Plain JS so it loads in any runner (tsx, vitest, the bundle).
import { receiveMessageOnPort, workerData, parentPort } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

// control's slots (Int32): whose turn, the byte count in buffer, the operation, the outcome, a new buffer on the port.
const STATE = 0;
const LENGTH = 1;
const OP = 2;
const STATUS = 3;
const GROWN = 4;
// STATE: a batch is in buffer (this thread's turn) / its answer is (the other side's turn, as at
// the start).
const ASKED = 1;
const ANSWERED = 2;
// OP: 1 runs the batch, CLOSE shuts the engine down.
const CLOSE = 2;
// STATUS: the answer is PostgreSQL's output / the text of an error the engine threw.
const OK = 0;
const FAILED = 1;

const { dataDir, options, control, buffer, port } = workerData;
const ctrl = new Int32Array(control);
let data = new Uint8Array(buffer);

/** An error's text, as it crosses to the other side. */
const textOf = (e) => (e instanceof Error ? e.message : String(e));

let lite;
try {
  lite = await PGlite.create(dataDir, options);
  parentPort.postMessage({ ready: true });
} catch (e) {
  parentPort.postMessage({ ready: false, error: textOf(e) });
}

function answer(bytes, status) {
  if (bytes.length > data.length) {
    const grown = new SharedArrayBuffer(Math.max(bytes.length, data.length * 2));
    data = new Uint8Array(grown);
    port.postMessage(grown);
    Atomics.store(ctrl, GROWN, 1);
  }
  data.set(bytes);
  Atomics.store(ctrl, LENGTH, bytes.length);
  Atomics.store(ctrl, STATUS, status);
  Atomics.store(ctrl, STATE, ANSWERED);
  Atomics.notify(ctrl, STATE);
}

while (lite) {
  for (let s = Atomics.load(ctrl, STATE); s !== ASKED; s = Atomics.load(ctrl, STATE)) Atomics.wait(ctrl, STATE, s);
  if (Atomics.load(ctrl, GROWN) === 1) {
    // The batch did not fit: the other side passed a larger buffer first.
    data = new Uint8Array(receiveMessageOnPort(port).message);
    Atomics.store(ctrl, GROWN, 0);
  }
  if (Atomics.load(ctrl, OP) === CLOSE) {
    try {
      await lite.close();
      answer(new Uint8Array(0), OK);
    } catch (e) {
      answer(new TextEncoder().encode(textOf(e)), FAILED);
    }
    break;
  }
  let out;
  let status = OK;
  try {
    out = lite.execProtocolRawSync(data.subarray(0, Atomics.load(ctrl, LENGTH)));
  } catch (e) {
    out = new TextEncoder().encode(textOf(e));
    status = FAILED;
  }
  answer(out, status);
}
port.close();
