// A large GraphQL result goes out as lib/json-body.ts writes it (a Buffer built from parts), not as
// the one string Apollo Server builds: a depth-1000 recall's result is a 130 kB string, a V8 large
// object whose flattening and UTF-8 copy for the socket cost page faults on every response
// (lib/json-body.ts). mountGraphql (router/gateway.ts) gives each HTTP request's context a holder;
// this plugin fills it with the body and hands Apollo `{ data: null }` to stringify instead, a
// string the route then does not send.
import type { ApolloServerPlugin } from '@apollo/server';
import type { GqlContext } from '../lib/graphql.ts';
import { jsonBody } from '../lib/json-body.ts';

type Holder = { body?: Buffer };
// A member of the context, not a WeakMap keyed by it: Apollo runs each operation on a shallow copy.
const HOLDER = Symbol('replyBody');
type WithHolder = GqlContext & { [HOLDER]?: Holder };

/** Marks a request's context as one whose large result its route sends; returns where the body will be. */
export function replyBodyHolder(ctx: GqlContext): Holder {
  const holder: Holder = {};
  (ctx as WithHolder)[HOLDER] = holder;
  return holder;
}

export function replyBodyPlugin(): ApolloServerPlugin<GqlContext> {
  return {
    async requestDidStart({ contextValue, requestIsBatched }) {
      const holder = (contextValue as WithHolder)[HOLDER];
      // A batch (were it ever allowed) is one body of several results: Apollo writes it.
      if (!holder || requestIsBatched) return;
      return {
        async willSendResponse({ response }) {
          const body = response.body;
          // Errors and extensions are left to Apollo: it orders and formats them (small results).
          if (body.kind !== 'single' || body.singleResult.errors || body.singleResult.extensions) return;
          const json = jsonBody({ data: body.singleResult.data });
          if (typeof json === 'string') return;
          holder.body = json;
          body.singleResult = { data: null };
        },
      };
    },
  };
}
