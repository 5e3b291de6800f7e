// The GraphQL router: @apollo/gateway over the checked-in supergraph, served by Apollo Server 5
// mounted on the gateway's fastify. Embedded mode executes each subgraph in-process
// (LocalGraphQLDataSource: no HTTP hop); distributed mode reaches each over HTTP with keep-alive.
import fs from 'node:fs';
import http from 'node:http';
import { ApolloServer, HeaderMap } from '@apollo/server';
import { ApolloGateway, LocalGraphQLDataSource, RemoteGraphQLDataSource } from '@apollo/gateway';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { newContext, type GqlContext } from '../lib/graphql.ts';
import { buildSubgraph, readSupergraphConfig } from './subgraphs.ts';
import { supergraphFile } from './compose.ts';

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 64 });

export interface GraphqlOptions {
  /** Reach subgraphs over HTTP at their routing URLs (distributed) instead of in-process. */
  remote?: boolean;
}

export async function createGateway(p: Platform, opts: GraphqlOptions = {}): Promise<ApolloServer<GqlContext>> {
  const subgraphs = readSupergraphConfig();
  const local = new Map<string, LocalGraphQLDataSource>();
  if (!opts.remote) for (const s of subgraphs) local.set(s.name, new LocalGraphQLDataSource(await buildSubgraph(s)));
  const gateway = new ApolloGateway({
    supergraphSdl: fs.readFileSync(supergraphFile, 'utf8'),
    buildService: ({ name, url }) =>
      local.get(name) ?? new RemoteGraphQLDataSource({ url, fetcher: ((u: string, init: RequestInit) => fetch(u, { ...init, keepalive: true })) as never }),
  });
  void keepAlive;
  const server = new ApolloServer<GqlContext>({
    gateway,
    introspection: p.config.graphqlIntrospection,
    includeStacktraceInErrorResponses: false,
    csrfPrevention: true,
  });
  await server.start();
  return server;
}

/** Mounts an Apollo Server on a fastify route (GET and POST). */
export function mountGraphql(app: FastifyInstance, server: ApolloServer<GqlContext>, p: Platform, url = '/graphql'): void {
  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    const headers = new HeaderMap();
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    const q = req.url.indexOf('?');
    const res = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest: { method: req.method.toUpperCase(), headers, search: q >= 0 ? req.url.slice(q) : '', body: req.body },
      context: async () => newContext(p),
    });
    for (const [k, v] of res.headers) reply.header(k, v);
    reply.code(res.status ?? 200);
    if (res.body.kind === 'complete') return reply.send(res.body.string);
    let out = '';
    for await (const chunk of res.body.asyncIterator) out += chunk;
    return reply.send(out);
  };
  app.route({ method: ['GET', 'POST'], url, handler });
}
