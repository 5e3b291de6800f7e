// PGlite with its engine on a worker thread (lib/db/pglite-worker.mjs). Embedded, PostgreSQL runs
// as WASM: in the platform's own thread it took ~45% of that thread under the perceive bench (the
// engine, its file system calls and their glue), on a 2-core machine whose second core the platform
// left to the client and the kernel. Here the engine runs on the worker and this thread keeps what
// PGlite's own query path does in JavaScript: the locks (one transaction, one statement at a time),
// serialising the wire-protocol messages, parsing the answer with the same parsers.
//
// The same surface as PGlite for what the platform uses (query, exec, transaction; execProtocol
// and the two locks for lib/db/pglite-prepared.ts; serializers and parsers), so the Prisma adapter
// and the driver run on it unchanged. One difference in how: PGlite sends a query's six messages
// (parse, describe, bind, describe, execute, sync) one call each; a call here is a message to the
// worker and back, so they go as one batch, with the statement's parameter types (which choose how
// each value is serialised) asked once per text and remembered. COPY's blobs and LISTEN are not
// offered (nothing here uses them).
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { Mutex, parse, protocol, TransactionAbortedError, types, type QueryOptions, type Results, type Transaction } from '@electric-sql/pglite';

type BackendMessage = Parameters<Parameters<InstanceType<typeof protocol.Parser>['parse']>[1]>[0];
type DatabaseError = InstanceType<typeof protocol.messages.DatabaseError>;
const { serialize } = protocol;

// The hand-over (lib/db/pglite-worker.mjs): control's slots, and what they hold.
const STATE = 0;
const LENGTH = 1;
const OP = 2;
const STATUS = 3;
const GROWN = 4;
const CONTROL_SLOTS = 8;
/** STATE: the batch is the thread's to run / the answer is this side's to read. */
const ASKED = 1;
const ANSWERED = 2;
/** OP: run the batch / shut the engine down. */
const RUN = 1;
const CLOSE = 2;
/** STATUS: PostgreSQL's output / the text of an error the engine threw / the thread stopped. */
const FAILED = 1;
const STOPPED = 3;
/** The shared buffer's first size; a larger batch or answer replaces it with a larger one. */
const BUFFER_BYTES = 1 << 20;

/** Atomics.waitAsync (Node 16+; not yet in TypeScript's ES2022 library). */
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, at: number, value: number): { async: boolean; value: Promise<string> | string } })
  .waitAsync;

/** Parameter types remembered per statement text (past this the memory starts again). */
const MAX_TYPED = 2_000;

/** PGlite's error for a failed statement: the server's error with the statement attached, as PGlite's own query() throws it. */
function statementError(e: DatabaseError, query: string, params: unknown[] | undefined, options: QueryOptions | undefined): DatabaseError {
  return Object.assign(e, { query, params, queryOptions: options });
}

export class PGliteThread {
  serializers: Record<number | string, (x: unknown) => string> = { ...types.serializers } as never;
  parsers: Record<number | string, (x: string, typeId?: number) => unknown> = { ...types.parsers } as never;
  readonly #worker: Worker;
  readonly #control: Int32Array;
  #buffer: Uint8Array;
  readonly #port: MessagePort;
  /** The call under way: calls run one after another (the locks make them so; this keeps it true). */
  #tail: Promise<unknown> = Promise.resolve();
  #stopped: Error | undefined;
  readonly #transactionLock = new Mutex();
  readonly #queryLock = new Mutex();
  readonly #paramTypes = new Map<string, number[]>();

  private constructor(worker: Worker, control: Int32Array, buffer: Uint8Array, port: MessagePort) {
    this.#worker = worker;
    this.#control = control;
    this.#buffer = buffer;
    this.#port = port;
    // A thread that stopped answers every call under way and after with its error (an answer
    // written here wakes the caller as the thread's would).
    const stop = (e: Error) => {
      this.#stopped ??= e;
      Atomics.store(control, STATUS, STOPPED);
      Atomics.store(control, STATE, ANSWERED);
      Atomics.notify(control, STATE);
    };
    worker.on('error', (e) => stop(new Error(`PGlite's thread failed: ${e.message}`)));
    worker.on('exit', (code) => stop(new Error(`PGlite's thread exited (${code})`)));
    // Idle, the thread does not keep the process alive (as PGlite in this thread did not); a call
    // under way does (see #roundTrip).
    worker.unref();
  }

  /** Starts the engine's thread on `dataDir` (PGlite's `create` options) and waits until it is ready. */
  static async open(dataDir: string, options: { startParams?: string[] } = {}): Promise<PGliteThread> {
    const control = new Int32Array(new SharedArrayBuffer(CONTROL_SLOTS * 4));
    const buffer = new Uint8Array(new SharedArrayBuffer(BUFFER_BYTES));
    const { port1, port2 } = new MessageChannel();
    port1.unref();
    const worker = new Worker(new URL('./pglite-worker.mjs', import.meta.url), {
      workerData: { dataDir, options, control: control.buffer, buffer: buffer.buffer, port: port2 },
      transferList: [port2],
    });
    const ready = await new Promise<{ ready: boolean; error?: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`PGlite's thread exited (${code}) before it was ready`)));
    });
    if (!ready.ready) {
      await worker.terminate();
      throw new Error(`PGlite could not open ${dataDir}: ${ready.error}`);
    }
    worker.removeAllListeners();
    const lite = new PGliteThread(worker, control, buffer, port1);
    await lite.#initArrayTypes();
    return lite;
  }

  /** Runs a batch of wire-protocol messages on the engine; the bytes PostgreSQL wrote back. */
  #call(message: Uint8Array, op = RUN): Promise<Uint8Array> {
    const run = this.#tail.then(() => this.#roundTrip(message, op));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #roundTrip(message: Uint8Array, op: number): Promise<Uint8Array> {
    if (this.#stopped) throw this.#stopped;
    const ctrl = this.#control;
    if (message.length > this.#buffer.length) {
      const grown = new SharedArrayBuffer(Math.max(message.length, this.#buffer.length * 2));
      this.#buffer = new Uint8Array(grown);
      this.#port.postMessage(grown);
      Atomics.store(ctrl, GROWN, 1);
    }
    this.#buffer.set(message);
    Atomics.store(ctrl, LENGTH, message.length);
    Atomics.store(ctrl, OP, op);
    // Waiting on shared memory holds no handle of the event loop: the thread is held in while a
    // call is under way, so a process whose last work is a query does not exit before its answer.
    this.#worker.ref();
    try {
      Atomics.store(ctrl, STATE, ASKED);
      Atomics.notify(ctrl, STATE);
      const wait = waitAsync(ctrl, STATE, ASKED);
      if (wait.async) await wait.value;
    } finally {
      this.#worker.unref();
    }
    const status = Atomics.load(ctrl, STATUS);
    if (status === STOPPED) throw this.#stopped ?? new Error("PGlite's thread stopped");
    if (Atomics.load(ctrl, GROWN) === 1) {
      this.#buffer = new Uint8Array(receiveMessageOnPort(this.#port)!.message as SharedArrayBuffer);
      Atomics.store(ctrl, GROWN, 0);
    }
    const bytes = this.#buffer.slice(0, Atomics.load(ctrl, LENGTH));
    if (status === FAILED) throw new Error(`PGlite: ${new TextDecoder().decode(bytes)}`);
    return bytes;
  }

  /** The backend messages of an answer, and the first error among them. */
  #messages(data: Uint8Array, onNotice?: QueryOptions['onNotice']): { messages: BackendMessage[]; error?: DatabaseError } {
    const messages: BackendMessage[] = [];
    let error: DatabaseError | undefined;
    new protocol.Parser().parse(data, (m) => {
      if (m instanceof protocol.messages.DatabaseError) error ??= m;
      else if (m instanceof protocol.messages.NoticeMessage) onNotice?.(m);
      messages.push(m);
    });
    return { messages, error };
  }

  /** Runs `batch` for the statement `query`: the answer's messages; its first database error thrown with the statement attached. */
  async #statement(batch: Uint8Array, query: string, params: unknown[] | undefined, options?: QueryOptions): Promise<BackendMessage[]> {
    const { messages, error } = this.#messages(await this.#call(batch), options?.onNotice);
    if (error) throw statementError(error, query, params, options);
    return messages;
  }

  /**
   * As PGlite's execProtocol: runs `message` as it is; throws the first database error unless told
   * not to. Its `syncToFs` is taken and needs nothing: NodeFS and the in-memory file system write through.
   */
  async execProtocol(
    message: Uint8Array,
    { throwOnError = true, onNotice }: { syncToFs?: boolean; throwOnError?: boolean; onNotice?: QueryOptions['onNotice'] } = {},
  ): Promise<{ messages: BackendMessage[]; data: Uint8Array }> {
    const data = await this.#call(message);
    const { messages, error } = this.#messages(data, onNotice);
    if (error && throwOnError) throw error;
    return { messages, data };
  }

  _runExclusiveTransaction<T>(fn: () => Promise<T>): Promise<T> {
    return this.#transactionLock.runExclusive(fn);
  }

  _runExclusiveQuery<T>(fn: () => Promise<T>): Promise<T> {
    return this.#queryLock.runExclusive(fn);
  }

  /** Array types' serializers and parsers, from the catalogue (as PGlite does once it started). */
  async #initArrayTypes(): Promise<void> {
    const { rows } = await this.query<{ oid: number; typarray: number }>(`
      SELECT b.oid, b.typarray
      FROM pg_catalog.pg_type a
      LEFT JOIN pg_catalog.pg_type b ON b.oid = a.typelem
      WHERE a.typcategory = 'A'
      GROUP BY b.oid, b.typarray
      ORDER BY b.oid`);
    for (const t of rows) {
      this.serializers[t.typarray] = (x) => types.arraySerializer(x, this.serializers[t.oid] as never, t.typarray);
      this.parsers[t.typarray] = (x) => types.arrayParser(x, this.parsers[t.oid] as never, t.typarray);
    }
  }

  /** The types of a statement's parameters (how each value is serialised), asked of the server once per text. */
  async #typesOf(query: string, params: unknown[], options?: QueryOptions): Promise<number[]> {
    const key = options?.paramTypes ? `${options.paramTypes.join(',')}\n${query}` : query;
    const known = this.#paramTypes.get(key);
    if (known) return known;
    const messages = await this.#statement(
      Buffer.concat([serialize.parse({ text: query, types: options?.paramTypes }), serialize.describe({ type: 'S' }), serialize.sync()]),
      query,
      params,
      options,
    );
    const typeIds = parse.parseDescribeStatementResults(messages as never);
    if (this.#paramTypes.size >= MAX_TYPED) this.#paramTypes.clear();
    this.#paramTypes.set(key, typeIds);
    return typeIds;
  }

  /** One statement with its parameters (extended protocol), in the caller's lock. */
  #runQuery<T>(query: string, params: unknown[] = [], options?: QueryOptions): Promise<Results<T>> {
    return this.#queryLock.runExclusive(async () => {
      if (options?.blob) throw new Error('PGlite on its own thread does not take COPY blobs');
      let values: (string | null)[] = [];
      if (params.length > 0) {
        const typeIds = await this.#typesOf(query, params, options);
        values = params.map((p, i) => {
          if (p === null || p === undefined) return null;
          const s = options?.serializers?.[typeIds[i]!] ?? this.serializers[typeIds[i]!];
          return s ? s(p) : String(p);
        });
      }
      const messages = await this.#statement(
        Buffer.concat([
          serialize.parse({ text: query, types: options?.paramTypes }),
          serialize.bind({ values }),
          serialize.describe({ type: 'P' }),
          serialize.execute({}),
          serialize.sync(),
        ]),
        query,
        params,
        options,
      );
      return parse.parseResults(messages as never, this.parsers as never, options)[0] as Results<T>;
    });
  }

  /** A script of statements (simple protocol), in the caller's lock. */
  #runExec(query: string, options?: QueryOptions): Promise<Results[]> {
    return this.#queryLock.runExclusive(async () => {
      if (options?.blob) throw new Error('PGlite on its own thread does not take COPY blobs');
      const messages = await this.#statement(Buffer.concat([serialize.query(query), serialize.sync()]), query, undefined, options);
      return parse.parseResults(messages as never, this.parsers as never, options);
    });
  }

  query<T>(query: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>> {
    return this.#transactionLock.runExclusive(() => this.#runQuery<T>(query, params, options));
  }

  exec(query: string, options?: QueryOptions): Promise<Results[]> {
    // A script may change what a statement's parameters are (a migration): ask again.
    this.#paramTypes.clear();
    return this.#transactionLock.runExclusive(() => this.#runExec(query, options));
  }

  /** As PGlite's transaction: BEGIN, the callback's statements, COMMIT (ROLLBACK when it throws). */
  transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.#transactionLock.runExclusive(async () => {
      await this.#runExec('BEGIN');
      let closed = false;
      const open = () => {
        if (closed) throw new Error('Transaction is closed');
      };
      const tx: Transaction = {
        query: async <R>(query: string, params?: unknown[], options?: QueryOptions) => {
          open();
          return this.#runQuery<R>(query, params, options);
        },
        sql: async () => {
          throw new Error('PGlite on its own thread: tx.sql is not offered (use tx.query)');
        },
        exec: async (query: string, options?: QueryOptions) => {
          open();
          return this.#runExec(query, options);
        },
        rollback: async () => {
          open();
          await this.#runExec('ROLLBACK');
          closed = true;
        },
        listen: async () => {
          throw new Error('PGlite on its own thread: LISTEN is not offered');
        },
        get closed() {
          return closed;
        },
      };
      try {
        const result = await callback(tx);
        if (!closed) {
          closed = true;
          const [done] = await this.#runExec('COMMIT');
          if (done?.command === 'ROLLBACK') throw statementError(new TransactionAbortedError(), 'COMMIT', undefined, undefined);
        }
        return result;
      } catch (e) {
        if (!closed) {
          closed = true;
          await this.#runExec('ROLLBACK');
        }
        throw e;
      }
    });
  }

  /** Waits for the statement and transaction under way, then stops the engine (a clean shutdown of its data dir). */
  async close(): Promise<void> {
    if (this.#stopped) return;
    await this.#transactionLock.runExclusive(() =>
      this.#queryLock.runExclusive(async () => {
        if (this.#stopped) return;
        await this.#call(new Uint8Array(0), CLOSE);
        this.#stopped = new Error('PGlite is closed');
      }),
    );
  }
}
