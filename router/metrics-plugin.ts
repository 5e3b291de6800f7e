// GraphQL operation metrics (lib/metrics.ts) as an Apollo Server plugin: every operation the server
// executes, over HTTP or WebSocket, is counted and timed by its name, type and outcome. The name is
// the resolved operation's (a client's choice, so operationLabel bounds how many are kept).
import type { ApolloServerPlugin } from '@apollo/server';
import type { GqlContext } from '../lib/graphql.ts';
import { graphqlDuration, graphqlOperations, operationLabel } from '../lib/metrics.ts';

export type Outcome = 'ok' | 'error' | 'invalid';

/** Counts and times one operation (the router's own introspection answers use it too). */
export function recordOperation(service: string, name: string | null | undefined, type: string, outcome: Outcome, seconds: number): void {
  const labels = { service, operation: operationLabel(name), type, outcome };
  graphqlOperations.inc(labels);
  graphqlDuration.observe(labels, seconds);
}

export function graphqlMetricsPlugin(service: string): ApolloServerPlugin<GqlContext> {
  return {
    async requestDidStart() {
      const t0 = performance.now();
      return {
        async willSendResponse(rc) {
          const body = rc.response.body;
          const errors = body.kind === 'single' ? body.singleResult.errors : undefined;
          // No resolved operation: it did not parse or validate (the client's mistake).
          const outcome: Outcome = !rc.operation ? 'invalid' : errors?.length ? 'error' : 'ok';
          recordOperation(service, rc.operation ? rc.operationName : undefined, rc.operation?.operation ?? 'unknown', outcome, (performance.now() - t0) / 1000);
        },
      };
    },
  };
}
