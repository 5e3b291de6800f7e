// CPU profile of the platform's gateway under bench/router.ts's load: the four-subgraph query from
// 50 clients (autocannon in its own process) with coalescing off, on the bench's seeded data, the
// V8 profiler running over the measured window only. Writes the .cpuprofile and prints its summary
// (bench/profile-summary.ts).
// --setup=stock|stockLocal|hiveOff|hiveRust profiles that setup of bench/router.ts instead (its
// subgraphs in the same process, as there), for the same figures of the engines compared.
// Run: npx tsx bench/router-profile.ts [pglite|postgres] [seconds, default 10] [--out=FILE] [--query=small] [--setup=NAME]
import fs from 'node:fs';
import http from 'node:http';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { ApolloGateway, LocalGraphQLDataSource, RemoteGraphQLDataSource } from '@apollo/gateway';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { unifiedGraphHandler as rustPlanner } from '@graphql-hive/router-runtime';
import { subgraphService } from '../router/subgraph-service.ts';
import { supergraphFile } from '../router/compose.ts';
import { buildSubgraph, readSupergraphConfig } from '../router/subgraphs.ts';
import { newContext } from '../lib/graphql.ts';
import { Session } from 'node:inspector/promises';
import { testPlatform } from '../test/helpers/platform.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { openDatabase } from '../lib/db/index.ts';
import { startGateway } from '../router/service.ts';
import { answer, load, QUERY, seed } from './router.ts';
import { summarise } from './profile-summary.ts';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const engine = args[0] ?? 'pglite';
const seconds = Number(args[1] ?? 10);
const out = flag('out') ?? `/tmp/router-${engine}-${process.pid}.cpuprofile`;
const query = flag('query') === 'small' ? '{ stacks(first: 20) { id name } }' : QUERY;

const env = { GATEWAY_PORT: '0', LOG_LEVEL: 'silent', COG_RATE_LIMIT_PER_MIN: '0', COG_GRAPHQL_COALESCE: 'off' };
const p = await testPlatform(env);
let fresh: Awaited<ReturnType<typeof freshDatabase>> | undefined;
if (engine === 'postgres') {
  fresh = await freshDatabase();
  await p.db.close();
  p.db = await openDatabase({ databaseUrl: fresh.url, dataDir: p.config.dataDir, poolSize: 20 });
}
await seed(p);
const setup = flag('setup') ?? 'off';
const closers: Array<() => Promise<unknown>> = [];
let url: string;
if (setup === 'off') {
  const gw = await startGateway({ ...p, config: { ...p.config, graphqlCoalesce: false } });
  closers.push(() => gw.close());
  url = `${gw.url}/graphql`;
} else {
  const subgraphs = readSupergraphConfig();
  const services = await Promise.all(
    subgraphs.map((s) => subgraphService(s.name)({ ...p, config: { ...p.config, subgraphPorts: { ...p.config.subgraphPorts, [s.name]: 0 } } })),
  );
  for (const s of services) closers.push(() => s.close());
  const urlOf = new Map(subgraphs.map((s, i) => [s.name, `${services[i].url}/graphql`]));
  if (setup === 'stock' || setup === 'stockLocal') {
    const schemaOf = new Map(await Promise.all(subgraphs.map(async (s) => [s.name, await buildSubgraph(s)] as const)));
    const gateway = new ApolloGateway({
      supergraphSdl: fs.readFileSync(supergraphFile, 'utf8'),
      buildService: ({ name }) =>
        setup === 'stock' ? new RemoteGraphQLDataSource({ url: urlOf.get(name)! }) : new LocalGraphQLDataSource(schemaOf.get(name!)!),
    });
    const server = new ApolloServer({ gateway });
    ({ url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' }, context: async () => newContext(p) }));
    closers.unshift(() => server.stop());
  } else {
    const sdl = fs
      .readFileSync(supergraphFile, 'utf8')
      .replace(/@join__graph\(name: "(\w+)", url: "[^"]*"\)/g, (_m, name: string) => `@join__graph(name: "${name}", url: "${urlOf.get(name)}")`);
    const runtime = createGatewayRuntime({
      supergraph: sdl,
      logging: false,
      graphqlEndpoint: '/graphql',
      transportEntries: { '*.http': { options: { deduplicateInflightRequests: false } } },
      ...(setup === 'hiveRust' ? { unifiedGraphHandler: rustPlanner } : {}),
    });
    const server = http.createServer(runtime);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.unshift(async () => {
      await new Promise((r) => server.close(r));
      await runtime.dispose();
    });
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/graphql`;
  }
}
const { body: expect } = await answer(url, query);
await load('warmup', url, Number(flag('warmup') ?? 3), query);

const session = new Session();
session.connect();
const heap = process.argv.includes('--heap');
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 500 });
await session.post('Profiler.start');
// --heap: the sampling heap profiler too (allocations by stack, every 8 KiB, collected ones included), written beside the profile.
if (heap)
  await session.post('HeapProfiler.startSampling', { samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
const cpu0 = process.cpuUsage();
const run = await load('profiled', url, seconds, query, expect);
const cpu = process.cpuUsage(cpu0);
const { profile } = await session.post('Profiler.stop');
fs.writeFileSync(out, JSON.stringify(profile));
if (heap) {
  const { profile: allocations } = await session.post('HeapProfiler.stopSampling');
  fs.writeFileSync(out.replace(/\.cpuprofile$/, '') + '.heapprofile', JSON.stringify(allocations));
}

const requests = run.rps * seconds;
console.log(
  `${engine}, ${setup}: ${run.rps.toFixed(0)} req/s, p50 ${run.p50} ms, p99 ${run.p99} ms, errors ${run.errors} (timeouts ${run.timeouts}, other bodies ${run.mismatches})`,
);
console.log(`gateway process CPU ${((cpu.user + cpu.system) / 1e3 / requests).toFixed(2)} ms a request (user ${(cpu.user / 1e3 / requests).toFixed(2)})`);
console.log(`profile: ${out}\n`);
console.log(summarise(profile as never, 40));
for (const close of closers) await close();
await p.cleanup();
await fresh?.drop();
process.exit(0);
