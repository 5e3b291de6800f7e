// The HTTP foundation every service stands on: fastify with schema-validated bodies, the
// problem+json error model, a 1 MiB body limit, and one pino log line per request.
import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import { Ajv, type ValidateFunction } from 'ajv';
import type { DataValidationCxt } from 'ajv/dist/types/index.js';
import addFormatsImport from 'ajv-formats';
import type { Logger } from './log.ts';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { Problem, badRequest, databaseProblem, isProblem, payloadTooLarge, unauthorized, CHALLENGE_INTERNAL, type FieldProblem } from './errors.ts';
import { httpDuration, httpRequests, metricsContentType, metricsText } from './metrics.ts';
import { jsonBody } from './json-body.ts';

export const BODY_LIMIT = 1024 * 1024;
const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

// Bodies are validated strictly (a wrong type is a 400, never coerced); query strings and path
// params arrive as text, so those are coerced.
const ajvBody = addFormats(new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, allErrors: true, strict: false }));
const ajvQuery = addFormats(new Ajv({ coerceTypes: true, useDefaults: true, removeAdditional: false, allErrors: true, strict: false }));

/**
 * A route schema's validator, compiled by ajv on the route's first request instead of at start:
 * compiling every route's schemas was a fifth of the gateway's start (issue 13). The same function
 * as ajv's for fastify: the result, `errors` after a failure, and the parent data (fastify passes
 * it when the validator has a `schemaEnv`, as ajv's have) so a root value can be coerced.
 */
function compiledOnFirstUse(ajv: Ajv, schema: object) {
  let compiled: ValidateFunction | undefined;
  const fn = () => (compiled ??= ajv.compile(schema));
  const validate = (data: unknown, cxt?: DataValidationCxt) => {
    const ok = fn()(data, cxt);
    validate.errors = fn().errors;
    return ok;
  };
  validate.errors = undefined as ValidateFunction['errors'];
  Object.defineProperty(validate, 'schemaEnv', { get: () => fn().schemaEnv });
  return validate;
}

export interface HttpOptions {
  name: string;
  log: Logger;
  /**
   * Internal services pass this key (even when it is undefined): with a token, every route except
   * health needs `Authorization: Bearer <token>`; without one the service may listen on loopback
   * only (listen() refuses any other address). Public services (gateway, faucet) leave it out.
   */
  internalToken?: string;
  /** Marks the service internal explicitly (default: whether `internalToken` is among the options). */
  internal?: boolean;
  /**
   * Request metrics and GET /metrics (default on). Off for servers named by an id (a sleeve's
   * /identity), whose name would be an unbounded label.
   */
  metrics?: boolean;
  /**
   * A public service's token for its operator routes (/metrics): with it they need
   * `Authorization: Bearer <token>`, without it they answer loopback clients only.
   */
  opsToken?: string;
}

/** What createHttp learned about each app: is it internal, and does it hold a token. */
const internalApps = new WeakMap<FastifyInstance, { token: boolean }>();

/** Loopback addresses: 127.0.0.0/8, ::1, localhost (and their IPv4-mapped forms). */
export function isLoopback(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(h);
}

const digest = (s: string) => createHash('sha256').update(s).digest();

export function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  for (const [k, v] of Object.entries(p.headers)) reply.header(k, v);
  return reply.code(p.status).type('application/problem+json').send(p.toJSON());
}

/** Answers a refused WebSocket upgrade (no reply object yet, only the socket) with the problem. */
export function refuseUpgrade(socket: Duplex, p: Problem): void {
  const body = JSON.stringify(p.toJSON());
  const headers = Object.entries(p.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${p.status} ${STATUS_CODES[p.status] ?? ''}\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${headers}connection: close\r\n\r\n${body}`,
  );
}

function validationProblem(err: FastifyError): Problem {
  const errors: FieldProblem[] = (err.validation ?? []).map((v) => {
    const missing = (v.params as { missingProperty?: string })?.missingProperty;
    const at = (v.instancePath || '').replace(/^\//, '').replace(/\//g, '.');
    const pathName = missing ? (at ? `${at}.${missing}` : missing) : at || (err.validationContext ?? 'body');
    return { path: pathName, message: v.message ?? 'is invalid' };
  });
  const where = err.validationContext ?? 'body';
  const detail = errors.length ? `Invalid ${where}: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}` : `Invalid ${where}`;
  return badRequest(detail, errors);
}

/** Maps any error to a problem; client-caused ones are 4xx, the rest a 500 that leaks nothing. */
export function toProblem(err: unknown): Problem {
  if (isProblem(err)) return err;
  const e = err as FastifyError & { type?: string };
  if (e?.validation) return validationProblem(e);
  if (e?.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || e?.statusCode === 413 || e?.type === 'entity.too.large') return payloadTooLarge(BODY_LIMIT);
  if (e?.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new Problem(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported media type', 'Send JSON bodies as application/json');
  if (e?.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') return badRequest('Content-Length does not match the body');
  if (e instanceof SyntaxError || e?.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return badRequest(`Malformed JSON body: ${e.message}`);
  if (typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    // Fastify's own codes (FST_ERR_BAD_URL, ...) are its internals, not the API's error codes.
    const code = e.code && !e.code.startsWith('FST_') ? e.code : e.statusCode === 404 ? 'NOT_FOUND' : e.statusCode === 414 ? 'URI_TOO_LONG' : 'BAD_REQUEST';
    return new Problem(e.statusCode, code, e.statusCode === 414 ? 'URI too long' : 'Bad request', e.message);
  }
  const db = databaseProblem(err);
  if (db) return db;
  return new Problem(500, 'INTERNAL', 'Internal error', 'The server failed to handle the request; it has been logged');
}

/** Fastify's router options, and the 405 lookup's (both must match paths alike). */
const ROUTER_OPTIONS = { ignoreTrailingSlash: true, maxParamLength: 500 };

/** Methods a 405's Allow lists (HEAD comes with GET). */
const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

export function createHttp(opts: HttpOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: opts.log.child({ service: opts.name }) as unknown as FastifyBaseLogger,
    // Our own onResponse hook writes the one line per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    return503OnClosing: true,
    forceCloseConnections: true,
    ajv: undefined,
    routerOptions: ROUTER_OPTIONS,
    // Router-level refusals (a malformed URL, an over-long path parameter) are problems too.
    frameworkErrors: (err, _req, reply) => {
      sendProblem(reply, toProblem(err));
    },
  });

  app.setValidatorCompiler(({ schema, httpPart }) => compiledOnFirstUse(httpPart === 'body' ? ajvBody : ajvQuery, schema));
  // Response schemas document what a route answers (the gateway's OpenAPI document); they do not
  // serialise it: fast-json-stringify would silently drop members a schema leaves out. A large
  // reply is written as a Buffer in parts (lib/json-body.ts); fastify's types say a serializer
  // returns a string, and its reply sends a Buffer as it is.
  const serialize = jsonBody as (data: unknown) => string;
  app.setSerializerCompiler(() => serialize);
  app.setReplySerializer(serialize);

  // JSON for any content type (spec clients are not always careful with headers); an empty body is
  // "no body", so bodiless POSTs like /sync work with or without a Content-Type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(badRequest(`Malformed JSON body: ${(e as Error).message}`) as never, undefined);
    }
  });

  const internal = opts.internal ?? Object.hasOwn(opts, 'internalToken');
  if (internal) internalApps.set(app, { token: !!opts.internalToken });
  if (opts.internalToken) {
    // Compared as digests in constant time, so the comparison leaks neither content nor length.
    const expected = digest(`Bearer ${opts.internalToken}`);
    app.addHook('onRequest', async (req, reply) => {
      // Health only (by the matched route, not a URL prefix): everything else needs the token.
      const route = req.routeOptions.url;
      if ((req.method === 'GET' || req.method === 'HEAD') && (route === '/health' || route === '/healthz')) return;
      const given = req.headers.authorization;
      if (typeof given !== 'string' || !timingSafeEqual(digest(given), expected)) {
        return sendProblem(reply, unauthorized('This internal service needs its bearer token', CHALLENGE_INTERNAL));
      }
    });
  }

  const metrics = opts.metrics !== false;
  app.addHook('onResponse', async (req: FastifyRequest, reply: FastifyReply) => {
    if (metrics) {
      // The route template (never the URL: it carries ids); one label value for every unknown path.
      const labels = { service: opts.name, method: req.method, route: req.routeOptions.url ?? '(unmatched)', status: String(reply.statusCode) };
      httpRequests.inc(labels);
      httpDuration.observe(labels, reply.elapsedTime / 1000);
    }
    req.log.info(
      { method: req.method, path: req.routeOptions.url ?? req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'request',
    );
  });

  app.setErrorHandler((err, req, reply) => {
    const p = toProblem(err);
    if (p.status >= 500 && p.status !== 503) req.log.error({ err }, 'unhandled error');
    return sendProblem(reply, p);
  });

  if (metrics) {
    const guard = opsGuard(internal, opts.opsToken);
    app.get('/metrics', { preHandler: guard }, async (_req, reply) => reply.type(metricsContentType).send(await metricsText()));
  }

  // Every route's path is also kept in a router of our own, so a known path asked with another
  // method is a 405 naming the allowed ones (RFC 9110 §15.5.6), not a 404.
  // Filled at the first unknown path rather than as each route is added: building it was part of
  // every service's start, and most never answer a 404.
  const paths = FindMyWay(ROUTER_OPTIONS);
  let added: Array<[string, string]> = [];
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) added.push([m, r.url]);
  });
  app.setNotFoundHandler((req, reply) => {
    for (const [m, url] of added) {
      try {
        paths.on(m as HTTPMethod, url, () => {});
      } catch {
        // already known (e.g. the HEAD route Fastify adds for a GET)
      }
    }
    added = [];
    const path = req.url.split('?')[0]!;
    const allow = METHODS.filter((m) => m !== req.method && paths.find(m, path) !== null);
    if (allow.length) {
      const list = allow.join(', ');
      return sendProblem(
        reply,
        new Problem(405, 'METHOD_NOT_ALLOWED', 'Method not allowed', `${req.method} is not allowed on ${path}; use ${list}`, {}, { allow: list }),
      );
    }
    return sendProblem(reply, new Problem(404, 'ROUTE_NOT_FOUND', 'Not found', `No route ${req.method} ${path}`));
  });

  return app;
}

/**
 * Who may read an operator route (/metrics, /readyz). An internal service's own token hook already
 * guards every route but health; a public one (gateway, faucet) asks for its ops token, or, with
 * none configured, answers loopback clients only (the local scraper), so a public port never hands
 * its internals to the world.
 */
export function opsGuard(internal: boolean, token: string | undefined) {
  const expected = token ? digest(`Bearer ${token}`) : undefined;
  return async (req: FastifyRequest, reply: FastifyReply) => {
    if (internal) return;
    if (expected) {
      const given = req.headers.authorization;
      if (typeof given !== 'string' || !timingSafeEqual(digest(given), expected)) {
        return sendProblem(reply, unauthorized('This operator route needs the internal bearer token', CHALLENGE_INTERNAL));
      }
      return;
    }
    if (!isLoopback(req.socket.remoteAddress ?? '')) {
      return sendProblem(reply, new Problem(403, 'FORBIDDEN', 'Forbidden', 'Operator routes answer loopback clients only unless COG_INTERNAL_TOKEN is set'));
    }
  };
}

/**
 * Listens on host:port; a port in use becomes an error naming it. An internal service without an
 * internal token refuses to listen anywhere but loopback (ARCHITECTURE.md: "Internal services bind
 * to loopback unless COG_INTERNAL_TOKEN is set").
 */
export async function listen(app: FastifyInstance, name: string, host: string, port: number): Promise<number> {
  const internal = internalApps.get(app);
  if (internal && !internal.token && !isLoopback(host)) {
    throw new Error(
      `${name}: refusing to listen on ${host} without COG_INTERNAL_TOKEN: internal services bind to loopback (127.0.0.1) unless the internal token is set`,
    );
  }
  try {
    await app.listen({ host, port });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE') throw new Error(`${name}: port ${port} is already in use (set its *_PORT variable or stop the other process)`);
    throw e;
  }
  const addr = app.server.address();
  return typeof addr === 'object' && addr ? addr.port : port;
}
