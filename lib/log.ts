// pino, one line per request at info. Secrets are redacted by key wherever they appear.
// On a terminal the lines go through pino-pretty (a transport: a worker thread formats them);
// anywhere else (a pipe, a file, a log collector) they stay JSON. COG_LOG_FORMAT forces either.
import { pino, type Logger } from 'pino';

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

export function createLogger(opts: { level?: string; name?: string; format?: LogFormat; destination?: NodeJS.WritableStream } = {}): Logger {
  const paths = SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `req.headers.${k}`]);
  const options = {
    level: opts.level ?? 'info',
    name: opts.name,
    base: undefined,
    redact: { paths, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  // A given destination (tests) is written as is, JSON; stdout is pretty only on a terminal.
  const format = opts.format ?? 'auto';
  if (!opts.destination && options.level !== 'silent' && prettyLogs(format)) {
    return pino(options, pino.transport({ target: 'pino-pretty', options: { ...PRETTY_OPTIONS, colorize: process.stdout.isTTY === true, destination: 1 } }));
  }
  return pino(options, opts.destination as never);
}
