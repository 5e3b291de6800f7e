// Typed calls of the gateway's /v1 REST routes, the types generated from openapi.json: the path
// is one of the document's, its parameters, query and body are checked by TypeScript, and the
// answer is the route's 2xx response type. Same transport as the rest of the SDK: signed when the
// client holds a key, 429/503 retried, problems as CogProblem.
import type { paths } from './generated/rest.ts';
import { CogInputError } from './errors.ts';
import type { Transport } from './transport.ts';

export type { paths, components } from './generated/rest.ts';

type Method = 'get' | 'post' | 'put' | 'delete';
type OpOf<P extends keyof paths, M extends Method> = paths[P] extends { [K in M]: infer O } ? O : never;
/** The paths that have an operation for method M. */
export type PathsFor<M extends Method> = { [P in keyof paths]: [OpOf<P, M>] extends [never] | [undefined] ? never : P }[keyof paths];

type PathParams<O> = O extends { parameters: { path: infer T } } ? ([T] extends [never | undefined] ? never : T) : never;
type QueryParams<O> = O extends { parameters: { query?: infer T } } ? ([T] extends [never | undefined] ? never : T) : never;
type Body<O> = O extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : O extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B | undefined
    : never;
type Json<R> = R extends { content: { 'application/json': infer J } } ? J : undefined;
/** The body of the route's success answer (200 or 201). */
export type Success<O> = O extends { responses: infer R } ? (200 extends keyof R ? Json<R[200]> : 201 extends keyof R ? Json<R[201]> : unknown) : never;

/** What a call takes: `params` for {placeholders}, `query`, `body`, when the route has them. */
export type RestInput<O> = ([PathParams<O>] extends [never] ? { params?: undefined } : { params: PathParams<O> }) &
  ([QueryParams<O>] extends [never] ? { query?: undefined } : { query?: QueryParams<O> }) &
  ([Body<O>] extends [never] ? { body?: undefined } : undefined extends Body<O> ? { body?: Body<O> } : { body: Body<O> });

type Args<O> = Record<never, never> extends RestInput<O> ? [input?: RestInput<O>] : [input: RestInput<O>];

export interface RestClient {
  get<P extends PathsFor<'get'>>(path: P, ...a: Args<OpOf<P, 'get'>>): Promise<Success<OpOf<P, 'get'>>>;
  post<P extends PathsFor<'post'>>(path: P, ...a: Args<OpOf<P, 'post'>>): Promise<Success<OpOf<P, 'post'>>>;
  delete<P extends PathsFor<'delete'>>(path: P, ...a: Args<OpOf<P, 'delete'>>): Promise<Success<OpOf<P, 'delete'>>>;
}

/** Fills the {placeholders} of a path, each percent-encoded; a missing or empty one names itself. */
export function fillPath(template: string, params: Record<string, unknown> | undefined): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = params?.[name];
    if ((typeof v !== 'string' && typeof v !== 'number') || v === '') throw new CogInputError(`params.${name}`, 'is required (a non-empty string)');
    return encodeURIComponent(String(v));
  });
}

export function restClient(http: Transport): RestClient {
  const call =
    (method: string) =>
    async (path: string, input: { params?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown } = {}) => {
      if (typeof path !== 'string' || !path.startsWith('/')) throw new CogInputError('path', 'must be a path of the OpenAPI document, e.g. /v1/stacks/{id}');
      const target = fillPath(path, input.params);
      const query = input.query
        ? Object.fromEntries(
            Object.entries(input.query)
              .filter(([, v]) => v !== undefined)
              .map(([k, v]) => [k, v as string | number | boolean]),
          )
        : undefined;
      return http.request(method, target, input.body, { query, idempotent: method === 'GET' });
    };
  return { get: call('GET'), post: call('POST'), delete: call('DELETE') } as unknown as RestClient;
}
