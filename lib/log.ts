// pino, one line per request at info. Secrets are redacted by key wherever they appear (scrubSecrets).
// On a terminal the lines go through pino-pretty (a transport: a worker thread formats them);
// anywhere else (a pipe, a file, a log collector) they stay JSON, written in blocks (stdoutDestination).
// COG_LOG_FORMAT forces either.
import { pino, type Logger } from 'pino';
import sonicBoom from 'sonic-boom';

// The class is module.exports itself, and its own SonicBoom member (which is what the types name).
const { SonicBoom } = sonicBoom;
type SonicBoom = InstanceType<typeof SonicBoom>;

export type { Logger };

/** Keys whose values must never reach a log line. */
export const SECRET_KEYS = ['identityPriv', 'masterSecret', 'privateKey', 'secret', 'seed', 'key', 'authorization', 'token', 'signature'];

export type LogFormat = 'auto' | 'json' | 'pretty';

/** Whether lines to `stream` are formatted for people: `auto` asks whether it is a terminal. */
export function prettyLogs(format: LogFormat, stream: { isTTY?: boolean } = process.stdout): boolean {
  return format === 'pretty' || (format === 'auto' && stream.isTTY === true);
}

/** The pino-pretty options: time of day, level in colour, the logger name, no pid or host. */
export const PRETTY_OPTIONS = { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true, messageKey: 'msg' };

const SECRETS = new Set(SECRET_KEYS);
const CENSOR = '[redacted]';
/** How deep in a log object secret keys are looked for (the request headers are at depth 2). */
const SCRUB_DEPTH = 4;

/**
 * A log object with the value of every secret key replaced, at any depth up to SCRUB_DEPTH (and in
 * arrays): the object itself when it holds none, else a copy; the caller's objects are never
 * changed. An error that holds one is copied with its class, message and stack.
 * Pino's path redaction did this with wildcard paths (`*.key`, `*.*.key`) at about 18 µs a line,
 * six times the line itself: one request line each is the most common log there is.
 */
export function scrubSecrets(v: unknown, depth = 0): unknown {
  if (v === null || typeof v !== 'object' || depth > SCRUB_DEPTH) return v;
  if (Array.isArray(v)) {
    let out: unknown[] | undefined;
    v.forEach((x, i) => {
      const y = scrubSecrets(x, depth + 1);
      if (y !== x) (out ??= [...v])[i] = y;
    });
    return out ?? v;
  }
  let out: Record<string, unknown> | undefined;
  const o = v as Record<string, unknown>;
  for (const k in o) {
    const x = o[k];
    const y = SECRETS.has(k) ? CENSOR : x !== null && typeof x === 'object' ? scrubSecrets(x, depth + 1) : x;
    if (y === x) continue;
    out ??=
      v instanceof Error
        ? (Object.assign(Object.create(Object.getPrototypeOf(v)), { message: v.message, stack: v.stack }, o) as Record<string, unknown>)
        : { ...o };
    out[k] = y;
  }
  return out ?? v;
}

export function createLogger(opts: { level?: string; name?: string; format?: LogFormat; destination?: NodeJS.WritableStream } = {}): Logger {
  const options = {
    level: opts.level ?? 'info',
    name: opts.name,
    base: undefined,
    formatters: { log: (obj: Record<string, unknown>) => scrubSecrets(obj) as Record<string, unknown> },
    timestamp: isoTime,
  };
  // A given destination (tests) is written as is, JSON; stdout is pretty only on a terminal.
  const format = opts.format ?? 'auto';
  if (!opts.destination && options.level !== 'silent' && prettyLogs(format)) {
    return pino(options, pino.transport({ target: 'pino-pretty', options: { ...PRETTY_OPTIONS, colorize: process.stdout.isTTY === true, destination: 1 } }));
  }
  return pino(options, (opts.destination ?? stdoutDestination()) as never);
}

/**
 * pino's isoTime, formatted once a millisecond: under load several lines share one (a request line
 * each, 3,000 a second), and formatting a Date each time was a seventh of a line's cost.
 */
let isoMs = 0;
let isoText = '';
function isoTime(): string {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    isoText = `,"time":"${new Date(now).toISOString()}"`;
  }
  return isoText;
}

/**
 * Characters of JSON log lines gathered before stdout is written, and how long at most. Just under
 * sonic-boom's largest write (16 kB): each write is a thread-pool call that wakes a thread and then
 * the reader, and at 4 kB the writes were half of a request line's cost under the perceive bench
 * (2.4% of the platform's thread).
 */
const LOG_BLOCK_CHARS = 16_000;
const LOG_FLUSH_MS = 200;

/**
 * Log lines gathered into blocks before sonic-boom sees them. Handed the lines one by one (its
 * minLength), sonic-boom appends each to the string it is gathering and measures that string's
 * bytes again (Buffer.byteLength of a growing concatenation, flattened each time): at 16 kB, about
 * 8 kB copied and scanned a line, 2.7% of the gateway's thread and a twelfth of what it allocated
 * under GET /healthz. Here a line is pushed onto an array; a block is joined once and written once.
 */
class LineBlocks {
  private lines: string[] = [];
  private chars = 0;
  /** stdout's reader went away (EPIPE): logging stops here, the process goes on. */
  private broken = false;

  constructor(private readonly out: SonicBoom) {
    // As pino's own destination does: a broken pipe ends the logging, any other error is the stream's.
    const brokenPipe = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') {
        this.broken = true;
        this.lines = [];
        return;
      }
      out.removeListener('error', brokenPipe);
      out.emit('error', err);
    };
    out.on('error', brokenPipe);
  }

  write(line: string): boolean {
    if (this.broken) return true;
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= LOG_BLOCK_CHARS) this.drain();
    return true;
  }

  /** Hands what is gathered to sonic-boom, which writes it now (or after the write in flight). */
  private drain(): void {
    if (this.broken || !this.lines.length) return;
    const text = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    this.out.write(text);
  }

  flush(cb?: (err?: Error) => void): void {
    this.drain();
    if (!cb) return;
    if (this.broken) cb();
    else this.out.flush(cb);
  }

  /** Everything gathered or in flight, written before this returns (the process is exiting). */
  flushSync(): void {
    this.drain();
    if (!this.broken) this.out.flushSync();
  }
}

let stdoutLines: LineBlocks | undefined;

/**
 * stdout for JSON lines, one for every logger of the process: written a block at a time (16 kB, or
 * what 200 ms gathered) instead of a write per line. Under load the request lines were a write
 * each, a thread-pool call and a wake-up of whatever reads the pipe: with them at info, as
 * `npm start` runs, perceive on PostgreSQL did 0.38 of the bare inserts' rate, 0.43 in blocks
 * (three alternating pairs). Flushed synchronously when the process exits; a kill -9 loses at most
 * the last 200 ms.
 */
function stdoutDestination(): LineBlocks {
  if (stdoutLines) return stdoutLines;
  const dest = new LineBlocks(new SonicBoom({ fd: 1, sync: false }));
  const timer = setInterval(() => {
    try {
      dest.flush();
    } catch {
      clearInterval(timer); // closed (a broken pipe): nothing more to write
    }
  }, LOG_FLUSH_MS);
  timer.unref();
  process.on('exit', () => {
    try {
      dest.flushSync();
    } catch {
      // stdout is gone (a closed pipe): the lines have nowhere to go
    }
  });
  stdoutLines = dest;
  return dest;
}
