// Gateway :7070 — the single external entry point: GET /healthz, the GraphQL router at /graphql,
// the /v1 REST shim, and (router/events.ts) the WebSocket event streams.
import type { FastifyInstance } from 'fastify';
import { createHttp, listen, refuseUpgrade } from '../lib/http.ts';
import { mountReadiness } from '../lib/ready.ts';
import { Problem } from '../lib/errors.ts';
import type { RunningService, ServiceStarter } from '../lib/service.ts';
import { registerRest } from '../compat-rest/index.ts';
import { installOpenapi } from '../compat-rest/openapi.ts';
import { createGateway, mountGraphql } from './gateway.ts';
import type { CoalesceStats } from './coalesce.ts';
import { createEventStream } from './events.ts';
import { createGraphqlWs } from './ws.ts';
import { routerSchema } from './subscriptions.ts';
import { mountGraphiql } from './graphiql.ts';
import { mountUi } from './ui.ts';
import { innerCallHeaders, installGuards } from './auth.ts';
import { mountMcp } from '../mcp/http.ts';

export interface GatewayRoute {
  method: string;
  url: string;
}
const routeLists = new WeakMap<RunningService, GatewayRoute[]>();
/** Every route a started gateway registered (the fuzz suite drives them all). */
export const gatewayRoutes = (gateway: RunningService): GatewayRoute[] => [...(routeLists.get(gateway) ?? [])];

const coalesceStats = new WeakMap<RunningService, Map<string, CoalesceStats>>();
/** A started gateway's subgraph fetch counts, run and coalesced (router/coalesce.ts), per subgraph. */
export const gatewayCoalesceStats = (gateway: RunningService): Map<string, CoalesceStats> => coalesceStats.get(gateway) ?? new Map();

/** GET /healthz (also described by the OpenAPI document, bin/openapi.ts). */
export function mountHealth(app: FastifyInstance): void {
  app.get('/healthz', async () => ({ ok: true, name: 'cog-gateway', ts: Date.now() }));
}

export const startGateway: ServiceStarter = async (p) => {
  const app = createHttp({ name: 'gateway', log: p.log, opsToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'gateway', needs: ['database', 'bus', 'cache', 'medulla'], soft: ['cache'], public: true });
  const routes: GatewayRoute[] = [];
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routes.push({ method, url: r.url });
  });
  await installOpenapi(app);
  mountHealth(app);
  await installGuards(app, p);
  await registerRest(app, p);
  const mcp = mountMcp(app, p, { innerHeaders: innerCallHeaders });
  const { server: gql, apiSchema, coalesced } = await createGateway(p, { remote: p.config.subgraphs === 'remote' });
  const schema = routerSchema(p, gql, apiSchema);
  mountGraphql(app, gql, p, '/graphql', { schema, introspection: p.config.graphqlIntrospection });
  if (p.config.graphqlIntrospection) mountGraphiql(app);
  mountUi(app);
  const events = createEventStream(p);
  const gqlWs = createGraphqlWs(p, gql, schema);
  app.server.on('upgrade', (req, socket, head) => {
    if (events.handleUpgrade(req, socket, head) || gqlWs.handleUpgrade(req, socket, head)) return;
    // Answered, not just dropped: a client sees why its socket did not open.
    const path = (req.url ?? '/').split('?')[0];
    refuseUpgrade(socket, new Problem(404, 'ROUTE_NOT_FOUND', 'Not found', `No WebSocket endpoint at ${path} (use /graphql or /v1/events)`));
  });
  const port = await listen(app, 'gateway', p.config.host, p.config.ports.gateway);
  const service: RunningService = {
    name: 'gateway',
    url: `http://${p.config.host}:${port}`,
    async close() {
      await events.close();
      await gqlWs.close();
      await mcp.close();
      await app.close();
      await gql.stop();
    },
  };
  routeLists.set(service, routes);
  coalesceStats.set(service, coalesced);
  return service;
};
