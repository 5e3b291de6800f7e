// Shared pieces of the GraphQL subgraphs: the per-request context, DataLoader registry (one loader
// per name per request, so entity fields batch into one query), and Problem -> GraphQLError with
// the same code as the problem+json error in extensions.code.
import DataLoader from 'dataloader';
import { GraphQLError } from 'graphql';
import type { Platform } from './platform.ts';
import { databaseProblem, isProblem } from './errors.ts';
import { batchedReads, type ReadPart } from './db/statement.ts';

export interface GqlContext {
  platform: Platform;
  loaders: Map<string, DataLoader<unknown, unknown>>;
  /** The request's reads, batched (read()); made on first use. */
  reads?: <T>(part: ReadPart<T>) => Promise<T>;
}

export function newContext(platform: Platform): GqlContext {
  return { platform, loaders: new Map() };
}

/** The request's loader named `name`, created on first use from a batch function. */
export function loader<K, V>(ctx: GqlContext, name: string, batch: (keys: readonly K[]) => Promise<(V | Error)[]>): DataLoader<K, V> {
  let l = ctx.loaders.get(name) as DataLoader<K, V> | undefined;
  if (!l) {
    l = new DataLoader<K, V>(batch, { maxBatchSize: 1000 });
    ctx.loaders.set(name, l as DataLoader<unknown, unknown>);
  }
  return l;
}

/**
 * One read of the request (a ReadPart, lib/db/statement.ts): the reads its loaders dispatch in the
 * same turn, as the parallel fetches of a federated query do, run as one statement through the
 * driver (batchedReads).
 */
export function read<T>(ctx: GqlContext, part: ReadPart<T>): Promise<T> {
  ctx.reads ??= batchedReads(ctx.platform.db);
  return ctx.reads(part);
}

/** Orders batch results by key; missing keys resolve to null. */
export function byKey<K, V>(keys: readonly K[], rows: V[], keyOf: (v: V) => K): (V | null)[] {
  const m = new Map<K, V>();
  for (const r of rows) m.set(keyOf(r), r);
  return keys.map((k) => m.get(k) ?? null);
}

export function toGraphQLError(e: unknown): GraphQLError {
  if (e instanceof GraphQLError) return e;
  e = databaseProblem(e) ?? e;
  if (isProblem(e)) {
    const body = e.toJSON();
    // The problem's status travels in extensions.status, never as the HTTP status: an executed
    // operation is a 200 in both modes (a non-2xx would make clients drop partial data, and the
    // router's HTTP data source would take it for a transport failure).
    return new GraphQLError(String(body.detail), { extensions: { ...body, code: e.code } });
  }
  return new GraphQLError('Internal error', { extensions: { code: 'INTERNAL' } });
}

/** Wraps a resolver so Problems surface as GraphQL errors carrying their code. */
export function guarded<A extends unknown[], R>(fn: (...args: A) => Promise<R> | R): (...args: A) => Promise<R> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (e) {
      throw toGraphQLError(e);
    }
  };
}

export const health = (name: string) => () => ({ ok: true, name });
