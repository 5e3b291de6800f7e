// Errors as typed problem objects. Every failure the SDK reports is a CogError:
//   * CogProblem: the platform refused (an application/problem+json body, or a GraphQL error whose
//     extensions carry the problem), with its code, status, detail and field errors;
//   * CogInputError: the SDK refused before sending anything (code INVALID_INPUT, the field named);
//   * CogNetworkError: the platform could not be reached (code NETWORK, status 0).

/** One field problem: `path` names the field (`text`, `cpv.syncCoeff`), `message` says what is wrong. */
export interface FieldError {
  path: string;
  message: string;
}

/** The problem+json body the platform sends (RFC 9457), plus its extra members. */
export interface ProblemBody {
  type?: string;
  title?: string;
  status: number;
  detail: string;
  code: string;
  errors?: FieldError[];
  [extra: string]: unknown;
}

export class CogError extends Error {
  readonly code: string;
  readonly status: number;
  readonly detail: string;
  readonly title: string;
  readonly type: string;
  /** Field errors; empty when the problem is not about one field. */
  readonly errors: FieldError[];
  /** The problem's other members (token/required/available on a 402, retryAfter on a 429, ...). */
  readonly extra: Record<string, unknown>;

  constructor(body: ProblemBody) {
    super(body.detail || body.title || body.code);
    this.name = 'CogError';
    this.code = body.code;
    this.status = body.status;
    this.detail = body.detail;
    this.title = body.title ?? body.code;
    this.type = body.type ?? `https://cog.dev/problems/${body.code.toLowerCase().replace(/_/g, '-')}`;
    this.errors = Array.isArray(body.errors) ? body.errors : [];
    const { type: _t, title: _ti, status: _s, detail: _d, code: _c, errors: _e, ...extra } = body;
    this.extra = extra;
  }

  /** The problem as the platform would send it. */
  toJSON(): ProblemBody {
    return {
      type: this.type,
      title: this.title,
      status: this.status,
      detail: this.detail,
      code: this.code,
      ...(this.errors.length ? { errors: this.errors } : {}),
      ...this.extra,
    };
  }

  /** Whether the same request may succeed later unchanged (rate limits, outages, network). */
  get retryable(): boolean {
    return this.status === 429 || this.status === 503 || this.code === 'NETWORK';
  }
}

/** The platform refused the request. */
export class CogProblem extends CogError {
  constructor(body: ProblemBody) {
    super(body);
    this.name = 'CogProblem';
  }
}

/** Bad input, refused by the SDK before anything was sent. `field` names it. */
export class CogInputError extends CogError {
  readonly field: string;
  constructor(field: string, message: string) {
    super({ status: 400, code: 'INVALID_INPUT', title: 'Invalid input', detail: `${field} ${message}`, errors: [{ path: field, message }] });
    this.name = 'CogInputError';
    this.field = field;
  }
}

/** The platform could not be reached (refused connection, DNS, timeout, a socket that closed). */
export class CogNetworkError extends CogError {
  constructor(
    detail: string,
    readonly cause?: unknown,
  ) {
    super({ status: 0, code: 'NETWORK', title: 'Network error', detail });
    this.name = 'CogNetworkError';
  }
}

export const isCogError = (e: unknown): e is CogError => e instanceof CogError;

/** A problem body from anything the platform sent: a problem+json object or a GraphQL error. */
export function problemFrom(status: number, body: unknown, fallbackDetail: string): CogProblem {
  const b = body && typeof body === 'object' ? (body as Record<string, unknown>) : {};
  const code = typeof b.code === 'string' ? b.code : status === 404 ? 'NOT_FOUND' : status >= 500 ? 'UNAVAILABLE' : 'HTTP_' + status;
  return new CogProblem({
    ...b,
    status: typeof b.status === 'number' ? b.status : status,
    code,
    detail: typeof b.detail === 'string' ? b.detail : typeof b.message === 'string' ? b.message : fallbackDetail,
    title: typeof b.title === 'string' ? b.title : undefined,
  } as ProblemBody);
}

/** A GraphQL error (extensions carry the problem: code, status, errors, retryAfter, ...). */
export function problemFromGraphQL(err: { message?: string; extensions?: Record<string, unknown> }): CogProblem {
  const ext = err.extensions ?? {};
  const code = typeof ext.code === 'string' ? ext.code : 'GRAPHQL_ERROR';
  const status =
    typeof ext.status === 'number'
      ? ext.status
      : code === 'GRAPHQL_VALIDATION_FAILED' || code === 'BAD_USER_INPUT' || code === 'GRAPHQL_PARSE_FAILED'
        ? 400
        : 500;
  const { code: _c, status: _s, stacktrace: _st, ...extra } = ext;
  return new CogProblem({ ...extra, status, code, detail: err.message ?? code } as ProblemBody);
}
