// The problem+json error model (RFC 9457) of ARCHITECTURE.md. Domain code throws these; the HTTP
// layer renders them as application/problem+json and GraphQL as errors with extensions.code.

export interface FieldProblem {
  path: string;
  message: string;
}

export class Problem extends Error {
  constructor(
    public readonly status: number,
    public readonly code: string,
    public readonly title: string,
    public readonly detail?: string,
    public readonly extra: Record<string, unknown> = {},
    public readonly headers: Record<string, string> = {},
  ) {
    super(detail ?? title);
    this.name = 'Problem';
  }

  toJSON(): Record<string, unknown> {
    return {
      type: `https://cog.dev/problems/${this.code.toLowerCase().replace(/_/g, '-')}`,
      title: this.title,
      status: this.status,
      detail: this.detail ?? this.title,
      code: this.code,
      // Extra members never replace the problem's own (status is the HTTP status, a number).
      ...Object.fromEntries(Object.entries(this.extra).filter(([k]) => !['type', 'title', 'status', 'detail', 'code'].includes(k))),
    };
  }
}

export const badRequest = (detail: string, errors?: FieldProblem[]) => new Problem(400, 'BAD_REQUEST', 'Bad request', detail, errors ? { errors } : {});

export const notFound = (what: string, id: string) =>
  new Problem(404, 'NOT_FOUND', `${what} not found`, `No ${what.toLowerCase()} with id ${JSON.stringify(id)}`);

export const conflict = (detail: string, code = 'CONFLICT') => new Problem(409, code, 'Conflict', detail);

export const insufficientTokens = (token: string, required: number, available: number) =>
  new Problem(402, 'INSUFFICIENT_TOKENS', 'Not enough tokens', `Needs ${required} ${token}, has ${available}`, {
    token,
    required,
    available,
  });

export const tooManyRequests = (detail: string, retryAfterSeconds: number) =>
  new Problem(
    429,
    'RATE_LIMITED',
    'Too many requests',
    detail,
    { retryAfter: retryAfterSeconds },
    {
      'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))),
    },
  );

/** The two ways in (RFC 9110 §11.6.1: a 401 names its challenge): a stack's ed25519 signature, an internal service's bearer token. */
export const CHALLENGE_SIGNED = 'Cog-Ed25519 realm="cog", headers="x-cog-stack x-cog-timestamp x-cog-signature"';
export const CHALLENGE_INTERNAL = 'Bearer realm="cog-internal"';
export const unauthorized = (detail: string, challenge = CHALLENGE_SIGNED) =>
  new Problem(401, 'UNAUTHORIZED', 'Unauthorized', detail, {}, { 'www-authenticate': challenge });

export const payloadTooLarge = (limit: number) => new Problem(413, 'PAYLOAD_TOO_LARGE', 'Payload too large', `Request bodies are limited to ${limit} bytes`);

/** A dependency (database, bus, chain) is down: retryable, and the only 5xx we send. */
export const unavailable = (detail: string, retryAfterSeconds = 1) =>
  new Problem(503, 'UNAVAILABLE', 'Service unavailable', detail, {}, { 'retry-after': String(retryAfterSeconds) });

export const isProblem = (e: unknown): e is Problem => e instanceof Problem;

/** The PostgreSQL SQLSTATE behind a database error (Prisma driver-adapter or pg error), if any. */
function sqlState(e: unknown): string | undefined {
  const x = e as { code?: unknown; meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; code?: unknown } } }; cause?: unknown } | null;
  const cause = x?.meta?.driverAdapterError?.cause;
  for (const c of [cause?.originalCode, cause?.code, (x?.cause as { code?: unknown } | undefined)?.code, x?.code]) {
    if (typeof c === 'string' && /^[0-9A-Z]{5}$/.test(c) && /^(0[0-9A]|2[0-9A-F]|4[02]|5[37]|XX)/.test(c)) return c;
  }
  return undefined;
}

/**
 * A transaction that failed only because of what ran beside it: a serialization failure or a
 * deadlock (PostgreSQL aborted it to let the other one through; P2034 is Prisma's name for both),
 * or no connection slot left on the server. Running it again from the start is the remedy.
 */
export function transientTransactionError(e: unknown): boolean {
  if ((e as { code?: unknown } | null)?.code === 'P2034') return true;
  const state = sqlState(e);
  return state === '40001' || state === '40P01' || state === '53300';
}

/**
 * node-postgres errors of a connection that broke mid-query (the server stopped or restarted) carry
 * no SQLSTATE; through the Prisma adapter they arrive as a plain Error with `clientVersion`, through
 * the driver (the hot path's statements) marked `fromDatabase`.
 */
const PG_CONNECTION_LOST =
  /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|Can't reach database server/;
function lostConnection(e: unknown): boolean {
  const x = e as { message?: unknown; clientVersion?: unknown; cause?: { message?: unknown } } | null;
  if (!x || typeof x !== 'object') return false;
  for (const m of [x.message, x.cause?.message]) if (typeof m === 'string' && PG_CONNECTION_LOST.test(m)) return true;
  const code = (x as { code?: unknown }).code;
  // The database's: through Prisma (clientVersion) or the driver (lib/db marks its errors fromDatabase).
  const database = typeof x.clientVersion === 'string' || (x as { fromDatabase?: unknown }).fromDatabase === true;
  return database && typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT)$/.test(code);
}

/**
 * Prisma's P2028 when an interactive transaction waited past its maxWait for a connection of the
 * pool (every one busy), or ran past its timeout: the platform is overloaded, and the request may
 * be tried again. Not its other P2028s (a transaction used after it closed is a bug).
 */
function busyPool(e: unknown): boolean {
  const x = e as { code?: unknown; message?: unknown } | null;
  return (
    x?.code === 'P2028' &&
    typeof x.message === 'string' &&
    /Unable to start a transaction in the given time|cannot be executed on an expired transaction/.test(x.message)
  );
}

/**
 * Maps a database error a client can cause, or a database outage, to a problem (undefined for
 * anything else): data exceptions (class 22, e.g. a NUL byte in a text value) are a 400; lost
 * connections, serialization failures, resource exhaustion and a pool with no connection free in
 * time are a retryable 503.
 */
export function databaseProblem(e: unknown): Problem | undefined {
  const prismaCode = (e as { code?: unknown } | null)?.code;
  if (typeof prismaCode === 'string' && /^P10(0[12]|17)$/.test(prismaCode)) return unavailable('the database is not reachable', 2);
  if (busyPool(e)) return unavailable('the database is busy (no connection free in time); retry', 1);
  if (lostConnection(e)) return unavailable('the database connection was lost; retry', 2);
  const state = sqlState(e);
  if (!state) return undefined;
  if (state.startsWith('22')) return badRequest('A value cannot be stored (for example a NUL character in a text field)');
  if (state.startsWith('08') || state.startsWith('53') || state.startsWith('57') || state === '40001' || state === '40P01') {
    return unavailable('the database is busy or not reachable; retry', 1);
  }
  return undefined;
}
