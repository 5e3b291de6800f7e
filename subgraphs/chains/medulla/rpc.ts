// Medulla's POST /rpc: both request forms of the spec.
//   JSON-RPC 2.0  {jsonrpc: "2.0", id, method, params} -> HTTP 200 {jsonrpc, id, result} or {jsonrpc, id, error}
//   plain         {method, params}                     -> {result, ...result's fields}, or {error} with HTTP 400 / 404
// Batches (arrays) are answered element by element. Malformed JSON is -32700 with HTTP 400 (the
// form is unknowable then). Params may be positional (array) or named (object).
import type { FastifyInstance } from 'fastify';
import { isProblem } from '../../../lib/errors.ts';

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** Application errors. */
export const NOT_FOUND = -32004;
export const BLOCK_REJECTED = -32010;
export const UNAVAILABLE = -32050;

export class RpcError extends Error {
  constructor(
    public readonly code: number,
    message: string,
    public readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

export const invalidParams = (message: string, data?: unknown) => new RpcError(INVALID_PARAMS, message, data);

export type Params = unknown[] | Record<string, unknown>;
export type Method = (params: Params) => unknown | Promise<unknown>;

/** Reads positional or named parameter i / name. */
export function param(params: Params, i: number, name: string): unknown {
  return Array.isArray(params) ? params[i] : params[name];
}

const isId = (v: unknown) => v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

interface Answer {
  body: Record<string, unknown>;
  status: number;
}

function httpStatusOf(code: number): number {
  if (code === NOT_FOUND) return 404;
  if (code === INTERNAL_ERROR) return 500;
  if (code === UNAVAILABLE) return 503;
  return 400;
}

async function answer(req: unknown, methods: Record<string, Method>, onError: (e: unknown) => void): Promise<Answer> {
  const r = req as Record<string, unknown>;
  const rpc2 = !!r && typeof r === 'object' && !Array.isArray(r) && 'jsonrpc' in r;
  const id = rpc2 && isId(r.id) ? (r.id as string | number | null) : null;
  const fail = (code: number, message: string, data?: unknown): Answer => {
    const error = data === undefined ? { code, message } : { code, message, data };
    return rpc2 ? { body: { jsonrpc: '2.0', id, error }, status: 200 } : { body: { error }, status: httpStatusOf(code) };
  };
  if (!r || typeof r !== 'object' || Array.isArray(r)) return fail(INVALID_REQUEST, 'request must be an object');
  if (rpc2 && r.jsonrpc !== '2.0') return fail(INVALID_REQUEST, 'jsonrpc must be "2.0"');
  if (rpc2 && 'id' in r && !isId(r.id)) return fail(INVALID_REQUEST, 'id must be a string, number or null');
  if (typeof r.method !== 'string') return fail(INVALID_REQUEST, 'method must be a string');
  const params = r.params === undefined || r.params === null ? [] : r.params;
  if (typeof params !== 'object') return fail(INVALID_PARAMS, 'params must be an array or an object');
  const fn = Object.hasOwn(methods, r.method) ? methods[r.method] : undefined;
  if (!fn) return fail(METHOD_NOT_FOUND, `unknown method ${JSON.stringify(r.method).slice(0, 80)}`);
  try {
    const result = (await fn(params as Params)) ?? null;
    if (rpc2) return { body: { jsonrpc: '2.0', id, result }, status: 200 };
    // The spec leaves the plain form's answer open: give `result`, and for an object result its
    // fields at the top level as well, so `body.result.height` and `body.height` both read.
    const flat = result && typeof result === 'object' && !Array.isArray(result) ? (result as Record<string, unknown>) : {};
    return { body: { ...flat, ...('id' in r ? { id: r.id } : {}), result }, status: 200 };
  } catch (e) {
    if (e instanceof RpcError) return fail(e.code, e.message, e.data);
    if (isProblem(e) && e.status < 500) return fail(INVALID_PARAMS, e.detail ?? e.title);
    if (isProblem(e) && e.status === 503) return fail(UNAVAILABLE, e.detail ?? e.title);
    onError(e);
    return fail(INTERNAL_ERROR, 'internal error');
  }
}

/** Registers POST /rpc serving `methods`. */
export function registerRpc(app: FastifyInstance, methods: Record<string, Method>): void {
  app.post(
    '/rpc',
    {
      errorHandler: (err, _req, reply) => {
        const e = err as { statusCode?: number; status?: number; code?: string };
        const status = e.statusCode ?? e.status ?? 500;
        if (status === 413) return reply.code(413).send({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'request too large' } });
        if (status >= 400 && status < 500)
          return reply.code(400).send({ jsonrpc: '2.0', id: null, error: { code: PARSE_ERROR, message: 'parse error: malformed JSON' } });
        app.log.error({ err }, 'rpc failure');
        return reply.code(500).send({ jsonrpc: '2.0', id: null, error: { code: INTERNAL_ERROR, message: 'internal error' } });
      },
    },
    async (req, reply) => {
      const onError = (e: unknown) => req.log.error({ err: e }, 'rpc method failed');
      const body = req.body;
      if (body === undefined) return reply.code(400).send({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'empty request' } });
      if (Array.isArray(body)) {
        if (!body.length || body.length > 100)
          return reply.code(400).send({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'a batch holds 1 to 100 requests' } });
        const out: Record<string, unknown>[] = [];
        for (const one of body) out.push((await answer(one, methods, onError)).body);
        return reply.code(200).send(out);
      }
      const a = await answer(body, methods, onError);
      return reply.code(a.status).send(a.body);
    },
  );
}
