// graphql-ws on /graphql: subscriptions from the router's subscription schema; queries and
// mutations sent over the socket go through the gateway like HTTP ones. Protocol close codes are
// graphql-ws's own (4408 init timeout, 4401 subscribe before ack, 4409 duplicate id, 4400 bad message).
import { WebSocketServer } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import { GraphQLError, getOperationAST, print, type ExecutionArgs } from 'graphql';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ApolloServer } from '@apollo/server';
import type { Platform } from '../lib/platform.ts';
import { newContext, type GqlContext } from '../lib/graphql.ts';
import type { GraphQLSchema } from 'graphql';
import { countSockets } from '../lib/metrics.ts';

/** `subscriptionSchema`: the router's schema with its Subscription type (routerSchema in subscriptions.ts). */
export function createGraphqlWs(p: Platform, server: ApolloServer<GqlContext>, subscriptionSchema: () => GraphQLSchema, opts: { initTimeoutMs?: number } = {}) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });
  const uncount = countSockets('graphql', () => wss.clients.size);
  const disposable = useServer(
    {
      schema: () => subscriptionSchema(),
      connectionInitWaitTimeout: opts.initTimeoutMs ?? 3000,
      context: () => newContext(p),
      execute: (async (args: ExecutionArgs) => {
        const op = getOperationAST(args.document, args.operationName);
        // A socket carries no per-message signature: with COG_AUTH=required, mutations go signed over
        // HTTP POST /graphql (router/auth.ts); createStack alone needs no key.
        if (
          p.config.auth === 'required' &&
          op?.operation === 'mutation' &&
          op.selectionSet.selections.some((s) => s.kind !== 'Field' || (s.name.value !== 'createStack' && s.name.value !== '__typename'))
        ) {
          return {
            errors: [new GraphQLError('Mutations need a signed HTTP request (POST /graphql) when COG_AUTH=required', { extensions: { code: 'UNAUTHORIZED' } })],
          };
        }
        const res = await server.executeOperation(
          { query: print(args.document), variables: args.variableValues ?? undefined, operationName: args.operationName ?? undefined },
          { contextValue: newContext(p) },
        );
        void op;
        return res.body.kind === 'single' ? res.body.singleResult : { errors: [{ message: 'incremental delivery is not supported over WebSocket' }] };
      }) as never,
    },
    wss,
  );
  return {
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
      const path = (req.url ?? '/').split('?')[0];
      if (path !== '/graphql') return false;
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
      return true;
    },
    async close() {
      uncount();
      for (const c of wss.clients) c.terminate();
      await disposable.dispose();
      await new Promise<void>((r) => wss.close(() => r()));
    },
  };
}
