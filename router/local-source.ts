// The in-process subgraph data source for embedded mode. @apollo/gateway's LocalGraphQLDataSource
// parses and validates every subgraph operation on every request; the operations come from cached
// query plans, so the set of distinct strings is small: each is parsed and validated once here,
// compiled once (graphql-jit: the operation becomes a JavaScript function over the schema's
// resolvers, with no per-field argument, info and path objects to build as graphql-js's execute
// does on every call), and only run after. An operation graphql-jit cannot compile runs on
// graphql-js's execute, as every operation does with `jit: false` (COG_GRAPHQL_JIT=off).
import { execute, parse, validate, type DocumentNode, type GraphQLError, type GraphQLSchema } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';

/** Distinct subgraph operations kept (oldest dropped first); query plans are cached, so few. */
const MAX_DOCUMENTS = 2000;

/** A subgraph operation as it runs: refused (its errors), or its document and, when compiled, its function. */
type Prepared = { errors: readonly GraphQLError[] } | { document: DocumentNode; compiled?: CompiledQuery };

export class InProcessDataSource implements GraphQLDataSource {
  private readonly operations = new Map<string, Prepared>();

  constructor(
    readonly schema: GraphQLSchema,
    private readonly opts: { jit?: boolean } = {},
  ) {}

  private prepare(query: string, operationName: string | undefined): Prepared {
    const key = operationName ? `${operationName}\n${query}` : query;
    let op = this.operations.get(key);
    if (!op) {
      try {
        const document = parse(query);
        const errors = validate(this.schema, document);
        op = errors.length ? { errors } : { document, compiled: this.opts.jit === false ? undefined : compile(this.schema, document, operationName) };
      } catch (e) {
        op = { errors: [e as GraphQLError] };
      }
      if (this.operations.size >= MAX_DOCUMENTS) this.operations.delete(this.operations.keys().next().value!);
      this.operations.set(key, op);
    }
    return op;
  }

  async process({ request, context }: GraphQLDataSourceProcessOptions): ReturnType<GraphQLDataSource['process']> {
    const op = this.prepare(request.query ?? '', request.operationName ?? undefined);
    if ('errors' in op) return { errors: op.errors };
    if (op.compiled) return (await op.compiled.query(undefined, context, request.variables ?? {})) as Awaited<ReturnType<GraphQLDataSource['process']>>;
    return await execute({
      schema: this.schema,
      document: op.document,
      variableValues: request.variables,
      operationName: request.operationName,
      contextValue: context,
    });
  }
}

/** The operation compiled by graphql-jit, or undefined when it cannot be (graphql-js runs it). */
function compile(schema: GraphQLSchema, document: DocumentNode, operationName: string | undefined): CompiledQuery | undefined {
  try {
    const compiled = compileQuery(schema, document, operationName, { disablingCapturingStackErrors: true });
    return isCompiledQuery(compiled) ? compiled : undefined;
  } catch {
    return undefined;
  }
}
