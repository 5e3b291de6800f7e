// Router benchmark: requests/s and p50/p99 for a query spanning four subgraphs (stacks, sleeves,
// economy, memory) at 50 concurrent clients, three ways in the same run on the same data:
//   ours    the platform's gateway (in-process subgraphs, fastify)
//   stock   a stock @apollo/gateway + Apollo standalone server reaching the same subgraphs over HTTP
//   direct  one subgraph called directly (the stacks subgraph alone), for router overhead
// Run: npx tsx bench/router.ts [seconds per run, default 8]
import autocannon from 'autocannon';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { ApolloGateway, RemoteGraphQLDataSource } from '@apollo/gateway';
import fs from 'node:fs';
import { testPlatform } from '../test/helpers/platform.ts';
import { startGateway } from '../router/service.ts';
import { subgraphService } from '../router/subgraph-service.ts';
import { supergraphFile } from '../router/compose.ts';
import { readSupergraphConfig } from '../router/subgraphs.ts';
import { newContext } from '../lib/graphql.ts';

export const QUERY = '{ stacks(first: 20) { id name sleeves { id embodimentType drift } balances { compute memory } memory(first: 3) { cid epoch } } }';

interface Run { name: string; rps: number; p50: number; p99: number; errors: number }

async function load(name: string, url: string, seconds: number, query = QUERY): Promise<Run> {
  const r = await autocannon({
    url, connections: 50, duration: seconds, method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }),
  });
  return { name, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

export async function runRouterBench(seconds = 8): Promise<Run[]> {
  // The rate limit is read from the platform's config (lib/config.ts): off for the benchmark.
  const p = await testPlatform({ GATEWAY_PORT: '0', LOG_LEVEL: 'silent', COG_RATE_LIMIT_PER_MIN: '0' });
  // 20 stacks with 3 sleeves each and a few memory nodes.
  for (let i = 0; i < 20; i++) {
    const id = `stack:human:${i + 1}:${i.toString(16).padStart(12, '0')}`;
    await p.db.prisma.stack.create({ data: { id, name: `s${i}`, kind: 'human', shape: 'A', pubKey: i.toString(16).padStart(64, '0'), syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1, residueCoeff: 1, routingCoeff: 1, masterSecret: 'x' } });
    for (let j = 0; j < 3; j++) {
      await p.db.prisma.sleeve.create({ data: { id: `sleeve:ai:${i * 3 + j + 1}:${(i * 3 + j).toString(16).padStart(8, '0')}`, stackId: id, embodimentType: 'ai', shape: 'A', tickRate: 2000 } });
    }
    for (let k = 0; k < 3; k++) {
      await p.db.prisma.memoryNode.create({ data: { cid: `cog://${(i * 3 + k).toString(16).padStart(64, '0')}@0`, stackId: id, epoch: 0, links: [], size: 10 } });
    }
  }
  const ours = await startGateway(p);
  const subgraphs = readSupergraphConfig();
  const services = await Promise.all(subgraphs.map((s) => {
    process.env[`SUBGRAPH_${s.name.toUpperCase()}_PORT`] = '0';
    return subgraphService(s.name)(p);
  }));
  const urlOf = new Map(subgraphs.map((s, i) => [s.name, `${services[i].url}/graphql`]));
  const stockGateway = new ApolloGateway({
    supergraphSdl: fs.readFileSync(supergraphFile, 'utf8'),
    buildService: ({ name }) => new RemoteGraphQLDataSource({ url: urlOf.get(name)! }),
  });
  const stock = new ApolloServer({ gateway: stockGateway });
  const { url: stockUrl } = await startStandaloneServer(stock, { listen: { port: 0, host: '127.0.0.1' }, context: async () => newContext(p) });

  const runs: Run[] = [];
  await load('warmup', `${ours.url}/graphql`, 2);
  runs.push(await load('ours (platform gateway)', `${ours.url}/graphql`, seconds));
  await load('warmup', stockUrl, 2);
  runs.push(await load('stock @apollo/gateway', stockUrl, seconds));
  const direct = '{ stacks(first: 20) { id name } }';
  runs.push(await load('ours, stacks-only query', `${ours.url}/graphql`, seconds, direct));
  runs.push(await load('stacks subgraph direct', urlOf.get('stacks')!, seconds, direct));

  await stock.stop();
  for (const s of services) await s.close();
  await ours.close();
  await p.cleanup();
  return runs;
}

export function formatRouterBench(runs: Run[]): string {
  const [ours, stock, oursSmall, direct] = runs;
  const rows = runs.map((r) => `| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.errors} |`);
  return [
    '| setup | req/s | p50 ms | p99 ms | errors |', '|---|---|---|---|---|', ...rows, '',
    `four-subgraph query: ours / stock = ${(ours.rps / stock.rps).toFixed(2)}x`,
    `router overhead on a one-subgraph query: ours ${oursSmall.rps.toFixed(0)} req/s vs direct ${direct.rps.toFixed(0)} req/s (${(oursSmall.rps / direct.rps).toFixed(2)}x)`,
    'reference (public graphql-gateways-benchmark, other hardware): stock @apollo/gateway 115 req/s, Hive Gateway 297 req/s',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const secs = Number(process.argv[2] ?? 8);
  runRouterBench(secs).then((runs) => {
    console.log(formatRouterBench(runs));
    process.exit(0);
  });
}
