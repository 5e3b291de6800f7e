// pino, JSON, one line per request at info. Secrets are redacted by key wherever they appear.
import { pino, type Logger } from 'pino';

export type { Logger };

/** Keys whose values must never reach a log line. */
export const SECRET_KEYS = ['identityPriv', 'masterSecret', 'privateKey', 'secret', 'seed', 'key', 'authorization', 'token', 'signature'];

export function createLogger(opts: { level?: string; name?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  const paths = SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `req.headers.${k}`]);
  return pino(
    {
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      name: opts.name,
      base: undefined,
      redact: { paths, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination as never,
  );
}
