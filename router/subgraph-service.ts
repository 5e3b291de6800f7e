// One subgraph as its own HTTP service (distributed mode: `cog service subgraph-<name>`), served
// by Apollo Server on fastify at /graphql. The router reaches it at its supergraph.yaml routing_url.
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { createHttp, listen } from '../lib/http.ts';
import { mountReadiness } from '../lib/ready.ts';
import type { ServiceStarter } from '../lib/service.ts';
import type { GqlContext } from '../lib/graphql.ts';
import { buildSubgraph, readSupergraphConfig } from './subgraphs.ts';
import { mountGraphql } from './gateway.ts';
import { graphqlMetricsPlugin } from './metrics-plugin.ts';
import { replyBodyPlugin } from './reply-body.ts';

export function subgraphService(name: string): ServiceStarter {
  return async (p) => {
    const cfg = readSupergraphConfig().find((s) => s.name === name);
    if (!cfg) throw new Error(`unknown subgraph ${name}`);
    // No stack traces in errors: the router passes a subgraph error's extensions on to the client.
    const server = new ApolloServer<GqlContext>({
      schema: await buildSubgraph(cfg),
      introspection: true,
      csrfPrevention: false,
      includeStacktraceInErrorResponses: false,
      plugins: [ApolloServerPluginInlineTraceDisabled(), graphqlMetricsPlugin(`subgraph-${name}`), replyBodyPlugin()],
      stopOnTerminationSignals: false,
    });
    await server.start();
    const app = createHttp({ name: `subgraph-${name}`, log: p.log, internalToken: p.config.internalToken });
    app.get('/health', async () => ({ ok: true, name: `subgraph-${name}` }));
    mountReadiness(app, p, { name: `subgraph-${name}`, needs: ['database'] });
    mountGraphql(app, server, p);
    const port = await listen(app, `subgraph-${name}`, p.config.host, p.config.subgraphPorts[name] ?? Number(new URL(cfg.routingUrl).port));
    return {
      name: `subgraph-${name}`,
      url: `http://${p.config.host}:${port}`,
      async close() {
        await app.close();
        await server.stop();
      },
    };
  };
}
