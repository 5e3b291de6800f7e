// The GraphQL router: @apollo/gateway over the checked-in supergraph, served by Apollo Server 5
// mounted on the gateway's fastify. Embedded mode executes each subgraph in-process
// (InProcessDataSource: no HTTP hop); distributed mode reaches each over HTTP with keep-alive.
import fs from 'node:fs';
import { ApolloServer, HeaderMap } from '@apollo/server';
import { ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { execute, getOperationAST, Kind, parse, specifiedRules, validate, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Platform } from '../lib/platform.ts';
import { internalAuthHeaders } from '../lib/internal-client.ts';
import { newContext, type GqlContext } from '../lib/graphql.ts';
// The supergraph is the checked-in file: nothing is composed at start (@apollo/composition is
// not even loaded; test/foundation/supergraph.test.ts keeps the file current).
import { buildSubgraph, readSupergraphConfig, supergraphFile } from './subgraphs.ts';
import { formatLimitError, limitRules } from './limits.ts';
import { InProcessDataSource } from './local-source.ts';
import { CoalescingDataSource, type CoalesceStats } from './coalesce.ts';
import { graphqlMetricsPlugin, recordOperation } from './metrics-plugin.ts';
import { replyBodyHolder, replyBodyPlugin } from './reply-body.ts';
import { commonJsExports } from '../lib/commonjs.ts';
import { deferUnusedGatewayDeps } from './deferred-deps.ts';
import { compiledPlanGateway, type PlanStats } from './plan-executor.ts';
import type { GraphQLDataSource } from '@apollo/gateway';

// @apollo/gateway reports usage data to Apollo and probes cloud metadata endpoints unless told not
// to; the platform sends nothing off the machine.
process.env.APOLLO_TELEMETRY_DISABLED = 'true';

export interface GraphqlOptions {
  /** Reach subgraphs over HTTP at their routing URLs (distributed) instead of in-process. */
  remote?: boolean;
  /** false: every query runs on @apollo/gateway's executor (tests compare the two); else compiled plans (router/plan-executor.ts). */
  compiledPlans?: boolean;
}

export interface Gateway {
  server: ApolloServer<GqlContext>;
  apiSchema: () => GraphQLSchema;
  /** Per subgraph: fetches run and fetches that joined an identical one (COG_GRAPHQL_COALESCE). */
  coalesced: Map<string, CoalesceStats>;
  /** Requests run from compiled plans and on @apollo/gateway's executor (none when plans are not compiled). */
  plans?: PlanStats;
}

// @apollo/gateway loads after the stand-ins for what it requires and never uses
// (router/deferred-deps.ts), as soon as this module is (cog start loads every service's modules
// while the stores open).
let apolloGateway: Promise<typeof import('@apollo/gateway')> | undefined;
const loadApolloGateway = () => {
  deferUnusedGatewayDeps();
  return (apolloGateway ??= import('@apollo/gateway'));
};
loadApolloGateway().catch(() => {}); // a failure is reported by createGateway

export async function createGateway(p: Platform, opts: GraphqlOptions = {}): Promise<Gateway> {
  const { ApolloGateway, RemoteGraphQLDataSource } = commonJsExports(await loadApolloGateway(), 'ApolloGateway');
  const subgraphs = readSupergraphConfig();
  const local = new Map<string, InProcessDataSource>();
  if (!opts.remote) for (const s of subgraphs) local.set(s.name, new InProcessDataSource(await buildSubgraph(s), { jit: p.config.graphqlJit }));
  const coalesced = new Map<string, CoalesceStats>();
  // The data source the gateway fetches each in-process subgraph through (coalescing or not).
  const sources = new Map<string, GraphQLDataSource>();
  const token = p.config.internalToken;
  const gateway = new ApolloGateway({
    supergraphSdl: fs.readFileSync(supergraphFile, 'utf8'),
    // The file is composition's output, checked against the subgraphs' schemas by
    // test/foundation/supergraph.test.ts: validating it again at every start (the gateway's default
    // outside NODE_ENV=production) cost a tenth of a second of each start.
    validateSupergraph: false,
    buildService: ({ name, url }) => {
      const inProcess = local.get(name);
      const source =
        inProcess ??
        new RemoteGraphQLDataSource({
          url: p.config.subgraphUrls[name] ?? url,
          willSendRequest: ({ request }) => {
            for (const [name, value] of Object.entries(internalAuthHeaders(token))) request.http?.headers.set(name, value);
          },
        });
      let built: GraphQLDataSource = source;
      if (p.config.graphqlCoalesce) {
        const coalescing = new CoalescingDataSource(source, name);
        coalesced.set(name, coalescing.stats);
        built = coalescing;
      }
      if (inProcess) sources.set(name, built);
      return built;
    },
  });
  // Embedded, queries over the in-process subgraphs run from their compiled plans (router/plan-executor.ts);
  // with tracing on, every query runs on @apollo/gateway's executor, whose spans (gateway.plan,
  // gateway.fetch, ...) a trace shows.
  const planned = opts.remote || opts.compiledPlans === false || p.config.otel ? undefined : compiledPlanGateway(gateway, sources);
  const server = new ApolloServer<GqlContext>({
    gateway: planned ?? gateway,
    introspection: p.config.graphqlIntrospection,
    includeStacktraceInErrorResponses: false,
    csrfPrevention: true,
    plugins: [ApolloServerPluginLandingPageDisabled(), graphqlMetricsPlugin('gateway'), replyBodyPlugin()],
    validationRules: limitRules(p.config.graphqlLimits),
    parseOptions: { maxTokens: p.config.graphqlLimits.maxTokens },
    formatError: (formatted) => formatLimitError(formatted),
    // `cog` closes every service on SIGINT/SIGTERM; Apollo's own handler would re-raise the signal
    // once it stopped and kill the process mid-shutdown (Ctrl-C exited 130, the stores unclosed).
    stopOnTerminationSignals: false,
  });
  await server.start();
  // The API schema the gateway serves (supergraph minus federation internals).
  const apiSchema = () => (gateway as unknown as { schema: GraphQLSchema }).schema;
  return { server, apiSchema, coalesced, plans: planned?.stats };
}

/** Error codes that mean the client sent a bad operation, never that the server failed. */
const CLIENT_CODES = new Set([
  'INVALID_GRAPHQL',
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'OPERATION_RESOLUTION_FAILURE',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
]);

/**
 * Apollo answers some client mistakes with a 500 (for example several operations and no
 * operationName, through the gateway's query planner): when every error is a client error, a 400.
 */
function clientStatus(status: number, body: string): number {
  if (status < 500 || status === 503) return status;
  try {
    const errors = (JSON.parse(body) as { errors?: Array<{ extensions?: { code?: string } }> }).errors;
    if (errors?.length && errors.every((e) => CLIENT_CODES.has(e.extensions?.code ?? ''))) return 400;
  } catch {
    // not JSON: leave the status alone
  }
  return status;
}

/**
 * What the router answers itself rather than the gateway: a subscription (served over WebSocket,
 * the gateway's schema has none), or an operation that selects only introspection fields at its
 * root (__schema or __type, and __typename). Undefined for anything else, including what does not
 * parse (the gateway answers that with its own errors). One parse, and only for a query that
 * mentions either.
 */
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A GET's query string without its empty operationName. */
function withoutEmptyName(search: string): string {
  const params = new URLSearchParams(search);
  if (params.get('operationName') === '') params.delete('operationName');
  const rest = params.toString();
  return rest ? `?${rest}` : '';
}

function routerOperation(
  req: FastifyRequest,
  maxTokens: number,
): { kind: 'subscription' } | { kind: 'introspection'; document: DocumentNode; operationName?: string; variables?: Record<string, unknown> } | undefined {
  // The route has no schema (Apollo validates the request itself): read it as untrusted JSON.
  const raw: unknown = req.method === 'GET' ? req.query : req.body;
  const src = isRecord(raw) ? raw : undefined;
  const query = src?.query;
  if (typeof query !== 'string' || (!query.includes('__') && !query.includes('subscription'))) return undefined;
  const operationName = typeof src?.operationName === 'string' ? src.operationName : undefined;
  let document: DocumentNode;
  try {
    document = parse(query, { maxTokens });
  } catch {
    return undefined;
  }
  const op = getOperationAST(document, operationName);
  if (op?.operation === 'subscription') return { kind: 'subscription' };
  if (op?.operation !== 'query') return undefined;
  const names = op.selectionSet.selections.map((s) => (s.kind === Kind.FIELD ? s.name.value : ''));
  if (!names.every((n) => n === '__schema' || n === '__type' || n === '__typename') || !names.some((n) => n !== '__typename')) return undefined;
  let variables: unknown = src?.variables;
  if (typeof variables === 'string') {
    try {
      variables = JSON.parse(variables);
    } catch {
      return undefined;
    }
  }
  if (variables !== undefined && !isRecord(variables)) return undefined;
  return { kind: 'introspection', document, operationName, variables };
}

/**
 * Mounts an Apollo Server on a fastify route (GET and POST). With `router` (the gateway: its whole
 * schema, subscriptions included), a subscription sent over HTTP is told where subscriptions are
 * served, and, with introspection on, an introspection-only query is answered from that schema:
 * the gateway's own has no Subscription type, since @apollo/gateway does not run subscriptions.
 */
export function mountGraphql(
  app: FastifyInstance,
  server: ApolloServer<GqlContext>,
  p: Platform,
  url = '/graphql',
  router?: { schema: () => GraphQLSchema; introspection: boolean },
): void {
  const rules = [...specifiedRules, ...limitRules(p.config.graphqlLimits)];
  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    // An empty operationName names no operation: read as absent. Apollo resolved none for it and
    // answered a 500 ("did not resolve an operation but execute did not return errors").
    let emptyName = false;
    for (const src of [req.body, req.query]) if (isRecord(src) && src.operationName === '') emptyName = delete src.operationName;
    const own = router && routerOperation(req, p.config.graphqlLimits.maxTokens);
    if (own?.kind === 'subscription') {
      const error = {
        message: 'Subscriptions are served over WebSocket on this path (graphql-ws, subprotocol graphql-transport-ws), not over HTTP',
        extensions: { code: 'BAD_REQUEST', status: 400 },
      };
      return reply
        .code(400)
        .type('application/json; charset=utf-8')
        .send(JSON.stringify({ errors: [error] }));
    }
    if (own?.kind === 'introspection' && router?.introspection) {
      const t0 = performance.now();
      const schema = router.schema();
      const errors = validate(schema, own.document, rules);
      const result = errors.length
        ? { errors: errors.map((e) => formatLimitError(e.toJSON())) }
        : await execute({ schema, document: own.document, operationName: own.operationName, variableValues: own.variables });
      const outcome = errors.length ? 'invalid' : 'errors' in result && result.errors?.length ? 'error' : 'ok';
      recordOperation('gateway', getOperationAST(own.document, own.operationName)?.name?.value, 'query', outcome, (performance.now() - t0) / 1000);
      const type = /application\/graphql-response\+json/.test(String(req.headers.accept ?? '')) ? 'application/graphql-response+json' : 'application/json';
      return reply
        .code(errors.length ? 400 : 200)
        .type(`${type}; charset=utf-8`)
        .send(JSON.stringify(result));
    }
    const headers = new HeaderMap();
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    const q = req.url.indexOf('?');
    const ctx = newContext(p);
    // A large result comes back here as a Buffer (router/reply-body.ts); Apollo's string is then unused.
    const large = replyBodyHolder(ctx);
    const res = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest: {
        method: req.method.toUpperCase(),
        headers,
        search: q < 0 ? '' : emptyName && req.method === 'GET' ? withoutEmptyName(req.url.slice(q)) : req.url.slice(q),
        body: req.body,
      },
      context: async () => ctx,
    });
    for (const [k, v] of res.headers) reply.header(k, v);
    if (large.body) return reply.code(res.status ?? 200).send(large.body);
    reply.code(clientStatus(res.status ?? 200, res.body.kind === 'complete' ? res.body.string : ''));
    if (res.body.kind === 'complete') return reply.send(res.body.string);
    let out = '';
    for await (const chunk of res.body.asyncIterator) out += chunk;
    return reply.send(out);
  };
  app.route({ method: ['GET', 'POST'], url, handler });
}
