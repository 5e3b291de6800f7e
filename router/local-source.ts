// The in-process subgraph data source for embedded mode. @apollo/gateway's LocalGraphQLDataSource
// parses and validates every subgraph operation on every request; the operations come from cached
// query plans, so the set of distinct strings is small: each is parsed and validated once here and
// only executed after.
import { execute, parse, validate, type DocumentNode, type GraphQLError, type GraphQLSchema } from 'graphql';
import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';

/** Distinct subgraph operations kept (oldest dropped first); query plans are cached, so few. */
const MAX_DOCUMENTS = 2000;

export class InProcessDataSource implements GraphQLDataSource {
  private readonly documents = new Map<string, DocumentNode | readonly GraphQLError[]>();

  constructor(readonly schema: GraphQLSchema) {}

  private document(query: string): DocumentNode | readonly GraphQLError[] {
    let doc = this.documents.get(query);
    if (!doc) {
      try {
        const parsed = parse(query);
        const errors = validate(this.schema, parsed);
        doc = errors.length ? errors : parsed;
      } catch (e) {
        doc = [e as GraphQLError];
      }
      if (this.documents.size >= MAX_DOCUMENTS) this.documents.delete(this.documents.keys().next().value!);
      this.documents.set(query, doc);
    }
    return doc;
  }

  async process({ request, context }: GraphQLDataSourceProcessOptions): ReturnType<GraphQLDataSource['process']> {
    const doc = this.document(request.query ?? '');
    if (Array.isArray(doc)) return { errors: doc };
    return await execute({
      schema: this.schema,
      document: doc as DocumentNode,
      variableValues: request.variables,
      operationName: request.operationName,
      contextValue: context,
    });
  }
}
