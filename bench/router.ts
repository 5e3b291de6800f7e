// Router benchmark: requests/s and p50/p99 for a query spanning four subgraphs (stacks, sleeves,
// economy, memory) at 50 concurrent clients, on the same data, in the same run:
//   ours     the platform's gateway (in-process subgraphs, fastify), as shipped: identical
//            concurrent subgraph queries coalesce (router/coalesce.ts)
//   off      the same with COG_GRAPHQL_COALESCE=off
//   stock    a stock @apollo/gateway + Apollo standalone server reaching the same subgraphs over HTTP
//   stockLocal  the same stock gateway with its subgraphs in-process too (LocalGraphQLDataSource
//            over the same subgraph schemas): like for like with ours, no HTTP hop
//   hive     Hive Gateway (@graphql-hive/gateway-runtime) over the same subgraphs over HTTP, as
//            shipped (it shares identical in-flight subgraph requests), and with that off
//   hiveRust Hive Gateway with its Rust query planner (@graphql-hive/router-runtime's
//            unifiedGraphHandler), in-flight dedupe off
//   small    ours (coalescing off) on a one-subgraph query, and that subgraph called directly
//            (router overhead)
// Every setup's answer is checked against ours before it is loaded.
// once over embedded PGlite and once over this machine's PostgreSQL (the distributed database;
// skipped with a note when it cannot be reached). The load generator (autocannon) runs in its own
// process so it does not share the server's event loop.
// Run: npx tsx bench/router.ts [seconds per run, default 8]
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { ApolloGateway, LocalGraphQLDataSource, RemoteGraphQLDataSource } from '@apollo/gateway';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { unifiedGraphHandler as rustPlanner } from '@graphql-hive/router-runtime';
import fs from 'node:fs';
import http from 'node:http';
import { testPlatform, type TestPlatform } from '../test/helpers/platform.ts';
import { seed } from '../test/helpers/router-seed.ts';

export { seed };
import { freshDatabase } from '../test/helpers/postgres.ts';
import { openDatabase } from '../lib/db/index.ts';
import { startGateway } from '../router/service.ts';
import { subgraphService } from '../router/subgraph-service.ts';
import { supergraphFile } from '../router/compose.ts';
import { buildSubgraph, readSupergraphConfig } from '../router/subgraphs.ts';
import { newContext } from '../lib/graphql.ts';

export const QUERY = '{ stacks(first: 20) { id name sleeves { id embodimentType drift } balances { compute memory } memory(first: 3) { cid epoch } } }';
const SMALL = '{ stacks(first: 20) { id name } }';

interface Run {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** Of the errors: answers timed out (10 s), and answers whose body differed from the expected. */
  timeouts?: number;
  mismatches?: number;
}
type Setup = 'ours' | 'off' | 'stock' | 'stockLocal' | 'hive' | 'hiveOff' | 'hiveRust' | 'small' | 'direct';

const SETUPS: Record<Setup, string> = {
  ours: 'ours (platform gateway)',
  off: 'ours, coalescing off',
  stock: 'stock @apollo/gateway',
  stockLocal: 'stock @apollo/gateway, subgraphs in-process (LocalGraphQLDataSource)',
  hive: 'Hive Gateway',
  hiveOff: 'Hive Gateway, dedupe off',
  hiveRust: 'Hive Gateway, Rust query planner, dedupe off',
  small: 'ours (coalescing off), stacks-only query',
  direct: 'stacks subgraph direct',
};

/** Concurrent clients of every run (COG_BENCH_CONNECTIONS overrides, for profiling at other loads). */
const CONNECTIONS = Number(process.env.COG_BENCH_CONNECTIONS ?? 50);

const autocannonBin = createRequire(import.meta.url).resolve('autocannon/autocannon.js');

/**
 * 50 clients for `seconds`, from a separate autocannon process. With `expect`, every answer's body
 * is compared with it, and a different one counts as an error (an answer of errors with a 200 is
 * not a request served).
 */
export function load(name: string, url: string, seconds: number, query = QUERY, expect?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const args = [
      autocannonBin,
      '-c',
      String(CONNECTIONS),
      '-d',
      String(seconds),
      '-m',
      'POST',
      '-H',
      'content-type=application/json',
      '-b',
      JSON.stringify({ query }),
      ...(expect === undefined ? [] : ['-E', expect]),
      '--json',
      url,
    ];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', () => {
      try {
        const r = JSON.parse(out) as {
          requests: { average: number };
          latency: { p50: number; p99: number };
          errors: number;
          non2xx: number;
          mismatches: number;
          timeouts: number;
        };
        const errors = r.errors + r.non2xx + r.mismatches;
        resolve({ name, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors, timeouts: r.timeouts, mismatches: r.mismatches });
      } catch (e) {
        reject(new Error(`autocannon printed no result for ${name}: ${(e as Error).message}`));
      }
    });
  });
}

/**
 * One request's answer: its data (each setup must give the same data and no errors before it is
 * loaded) and its body as sent (what every answer under load must be).
 */
export async function answer(url: string, query: string): Promise<{ data: string; body: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  const text = await res.text();
  const body = JSON.parse(text) as { data?: unknown; errors?: unknown };
  if (res.status !== 200 || body.errors || !body.data) throw new Error(`${url} answered ${res.status} ${text.slice(0, 300)}`);
  return { data: JSON.stringify(body.data), body: text };
}

async function runOn(p: TestPlatform, label: string, seconds: number): Promise<Run[]> {
  await seed(p);
  const ours = await startGateway(p);
  const uncoalesced = await startGateway({ ...p, config: { ...p.config, graphqlCoalesce: false } });
  const subgraphs = readSupergraphConfig();
  const services = await Promise.all(
    subgraphs.map((s) => subgraphService(s.name)({ ...p, config: { ...p.config, subgraphPorts: { ...p.config.subgraphPorts, [s.name]: 0 } } })),
  );
  const urlOf = new Map(subgraphs.map((s, i) => [s.name, `${services[i].url}/graphql`]));
  const stockGateway = new ApolloGateway({
    supergraphSdl: fs.readFileSync(supergraphFile, 'utf8'),
    buildService: ({ name }) => new RemoteGraphQLDataSource({ url: urlOf.get(name)! }),
  });
  const stock = new ApolloServer({ gateway: stockGateway });
  const { url: stockUrl } = await startStandaloneServer(stock, { listen: { port: 0, host: '127.0.0.1' }, context: async () => newContext(p) });
  // The stock gateway over the same subgraph schemas in this process: no HTTP hop, as ours.
  const schemaOf = new Map(await Promise.all(subgraphs.map(async (s) => [s.name, await buildSubgraph(s)] as const)));
  const stockLocalGateway = new ApolloGateway({
    supergraphSdl: fs.readFileSync(supergraphFile, 'utf8'),
    buildService: ({ name }) => new LocalGraphQLDataSource(schemaOf.get(name!)!),
  });
  const stockLocal = new ApolloServer({ gateway: stockLocalGateway });
  const { url: stockLocalUrl } = await startStandaloneServer(stockLocal, { listen: { port: 0, host: '127.0.0.1' }, context: async () => newContext(p) });
  // Hive Gateway over the same subgraphs: the checked-in supergraph with its URLs pointed at them.
  const sdl = fs
    .readFileSync(supergraphFile, 'utf8')
    .replace(/@join__graph\(name: "(\w+)", url: "[^"]*"\)/g, (_m, name: string) => `@join__graph(name: "${name}", url: "${urlOf.get(name)}")`);
  // As shipped it shares identical in-flight subgraph requests (deduplicateInflightRequests); the
  // second instance has that off, to compare the engines alone.
  // The MaxListenersExceededWarning ("11 abort listeners added to [AbortSignal]") these runs print
  // is Hive's: its HTTP executor (@graphql-tools/executor-http) hands every subgraph fetch the one
  // dispose signal of that subgraph's executor when the incoming request has no signal of its own,
  // and @whatwg-node/node-fetch adds an abort listener to it for each response in flight (removed
  // when the response ends: no leak). With 50 clients more than 10 are in flight on one subgraph.
  // Our gateway embedded makes no subgraph fetch; distributed, RemoteGraphQLDataSource passes no
  // shared signal.
  const startHive = async (dedupe: boolean, rust = false) => {
    const runtime = createGatewayRuntime({
      supergraph: sdl,
      logging: false,
      graphqlEndpoint: '/graphql',
      transportEntries: { '*.http': { options: { deduplicateInflightRequests: dedupe } } },
      ...(rust ? { unifiedGraphHandler: rustPlanner } : {}),
    });
    const server = http.createServer(runtime);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const close = async () => {
      await new Promise((r) => server.close(r));
      await runtime.dispose();
    };
    return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/graphql`, close };
  };
  const hive = await startHive(true);
  const hiveOff = await startHive(false);
  const hiveRust = await startHive(false, true);

  const urls: Record<Setup, string> = {
    ours: `${ours.url}/graphql`,
    off: `${uncoalesced.url}/graphql`,
    stock: stockUrl,
    stockLocal: stockLocalUrl,
    hive: hive.url,
    hiveOff: hiveOff.url,
    hiveRust: hiveRust.url,
    small: `${uncoalesced.url}/graphql`,
    direct: urlOf.get('stacks')!,
  };
  const bodies = new Map<Setup, string>();
  const expected = await answer(urls.ours, QUERY);
  for (const setup of ['ours', 'off', 'stock', 'stockLocal', 'hive', 'hiveOff', 'hiveRust'] as const) {
    const a = await answer(urls[setup], QUERY);
    if (a.data !== expected.data) throw new Error(`${SETUPS[setup]} gave a different answer from the platform gateway`);
    bodies.set(setup, a.body);
  }
  const small = await answer(urls.small, SMALL);
  const direct = await answer(urls.direct, SMALL);
  if (small.data !== direct.data) throw new Error('the stacks subgraph and the gateway disagree');
  bodies.set('small', small.body);
  bodies.set('direct', direct.body);

  const runs: Run[] = [];
  await load('warmup', urls.ours, 2);
  // Each setup's answers under load are checked against its first (a different body is an error).
  const run = async (setup: Setup, query = QUERY) => runs.push(await load(`${label}: ${SETUPS[setup]}`, urls[setup], seconds, query, bodies.get(setup)));
  await run('ours');
  for (const setup of ['off', 'stock', 'stockLocal', 'hive', 'hiveOff', 'hiveRust'] as const) {
    await load('warmup', urls[setup], 2);
    await run(setup);
  }
  // Router overhead: the gateway with nothing shared, against the subgraph it forwards to.
  await run('small', SMALL);
  await run('direct', SMALL);

  await stock.stop();
  await stockLocal.stop();
  await hive.close();
  await hiveOff.close();
  await hiveRust.close();
  for (const s of services) await s.close();
  await ours.close();
  await uncoalesced.close();
  return runs;
}

export async function runRouterBench(seconds = 8): Promise<{ runs: Run[]; notes: string[] }> {
  // The rate limit is read from the platform's config (lib/config.ts): off for the benchmark.
  const env = { GATEWAY_PORT: '0', LOG_LEVEL: 'silent', COG_RATE_LIMIT_PER_MIN: '0' };
  const notes: string[] = [];
  const lite = await testPlatform(env);
  const runs = await runOn(lite, 'PGlite', seconds);
  await lite.cleanup();

  let fresh: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  try {
    fresh = await freshDatabase();
  } catch (e) {
    notes.push(`PostgreSQL rows skipped: ${(e as Error).message}`);
  }
  if (fresh) {
    const p = await testPlatform(env);
    await p.db.close();
    p.db = await openDatabase({ databaseUrl: fresh.url, dataDir: p.config.dataDir, poolSize: 20 });
    runs.push(...(await runOn(p, 'PostgreSQL', seconds)));
    await p.cleanup();
    await fresh.drop();
  }
  return { runs, notes };
}

export function formatRouterBench({ runs, notes }: { runs: Run[]; notes: string[] }): string {
  const rows = runs.map((r) => `| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.errors} |`);
  const summary: string[] = [];
  for (const label of new Set(runs.map((r) => r.name.split(':')[0]))) {
    const of = (setup: Setup) => runs.find((r) => r.name === `${label}: ${SETUPS[setup]}`)!;
    const x = (a: Setup, b: Setup) => `${(of(a).rps / of(b).rps).toFixed(2)}x`;
    summary.push(
      `${label}: four-subgraph query ours / stock = ${x('ours', 'stock')}, ours / Hive = ${x('ours', 'hive')}; coalescing off / stock = ${x('off', 'stock')}, off / stock in-process = ${x('off', 'stockLocal')}, off / Hive dedupe off = ${x('off', 'hiveOff')}, off / Hive Rust planner = ${x('off', 'hiveRust')}; one-subgraph query ours / direct = ${x('small', 'direct')}`,
    );
  }
  return [
    '| setup | req/s | p50 ms | p99 ms | errors |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    ...summary,
    ...notes,
    'reference (public graphql-gateways-benchmark, other hardware, static subgraphs): stock @apollo/gateway 115 req/s, Hive Gateway 297 req/s',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const secs = Number(process.argv[2] ?? 8);
  runRouterBench(secs).then((r) => {
    console.log(formatRouterBench(r));
    process.exit(0);
  });
}
