// The router's compiled query plans (router/plan-executor.ts) answer what @apollo/gateway's own
// executor answers: the same data, errors (messages, paths, codes, serviceName), nulls bubbling
// across subgraph boundaries, aliases and repeated fields merged, fragments, __typename, @skip and
// @include from literals and variables (Condition nodes in the plan), refused variables. Every query
// is asked three times of each gateway: the first request of a query runs on Apollo's executor (it
// plans), the next ones on the compiled plan.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { createGateway, type Gateway } from '../../router/gateway.ts';
import { newContext } from '../../lib/graphql.ts';
import { seed } from '../helpers/router-seed.ts';

let p: TestPlatform;
let compiled: Gateway;
let apollo: Gateway;

beforeAll(async () => {
  p = await testPlatform({ COG_GRAPHQL_MAX_COST: '1000000', COG_GRAPHQL_COALESCE: 'off' });
  await seed(p);
  await p.db.prisma.sleeve.update({ where: { id: 'sleeve:ai:1:00000000' }, data: { alive: false, finalTokens: { compute: 1.5 } } });
  await p.db.prisma.stack.update({ where: { id: 'stack:human:2:000000000001' }, data: { episodicHead: `cog://${(3).toString(16).padStart(64, '0')}@0` } });
  compiled = await createGateway(p);
  apollo = await createGateway(p, { compiledPlans: false });
});
afterAll(async () => {
  await compiled?.server.stop();
  await apollo?.server.stop();
  await p?.cleanup();
});

const cases: Array<{ query: string; variables?: Record<string, unknown>; operationName?: string; refused?: boolean }> = [
  { query: '{ stacks(first: 20) { id name sleeves { id embodimentType drift } balances { compute memory } memory(first: 3) { cid epoch } } }' },
  {
    query: `{ stacks(first: 4) {
      id head { cid pinned stack { name } }
      sleeves { id tokens { compute } residues { id stack { name } sleeve { alive } } stack { id sleeves { id } } }
      balances { compute } claimable { compute } emissions { id stack { id } } residues { id } memory(first: 2) { cid linked { cid } stack { id } }
    } }`,
  },
  { query: '{ a: stacks(first: 3) { id x: name sleeves { id } } b: stacks(first: 2) { id sleeves { drift } sleeves { id alive } name } }' },
  {
    query:
      'query { stacks(first: 3) { ...F ... on Stack { balances { compute } sleeves { kind } } } } fragment F on Stack { id name memory(first: 1) { cid } sleeves { id } }',
  },
  ...[true, false].flatMap((s) =>
    [true, false].map((i) => ({
      query:
        'query($s: Boolean!, $i: Boolean!) { stacks(first: 3) { id sleeves @skip(if: $s) { id } balances @include(if: $i) { compute } name @include(if: false) memory(first: 1) @skip(if: $i) { cid } } }',
      variables: { s, i },
    })),
  ),
  { query: '{ __typename stacks(first: 2) { __typename id sleeves { __typename stack { __typename id name } } memory(first: 1) { __typename cid } } }' },
  // A Problem in a non-null field of the memory subgraph: the null bubbles up through [Stack!]! to the root.
  { query: '{ stacks(first: 3) { id memory(first: 2, offset: -1) { cid } } }' },
  {
    query:
      '{ a: stack(id: "stack:none") { id sleeves { id } } b: sleeve(id: "sleeve:none") { id } c: stack(id: "stack:human:3:000000000002") { id sleeves { id tokens { compute } } } }',
  },
  { query: 'query Q($n: Int) { stacks(first: $n) { id balances { compute } } }', variables: { n: 2 }, operationName: 'Q' },
  { query: 'query One { stacks(first: 1) { id } } query Two { stacks(first: 2) { id sleeves { id } } }', operationName: 'Two' },
  // Refused before planning: Apollo's executor answers (no plan to compile yet) ...
  { query: 'query($n: Int!) { stacks(first: $n) { id } }', variables: { n: 'x' }, refused: true },
  // ... and the next request of the same query with good variables plans it; then refused by the compiled executor.
  { query: 'query($n: Int!) { stacks(first: $n) { id } }', variables: { n: 1 } },
  { query: 'query($n: Int!) { stacks(first: $n) { id } }', variables: {} },
  // Mutations: a refusal with its subgraph and path, and a change whose answer joins another subgraph's entity.
  { query: 'mutation { recall(stackId: "stack:none", depth: 1) { fragments { cid } } }' },
  { query: 'mutation($id: ID!) { decommissionSleeve(id: $id) { id stack { name } } }', variables: { id: 'sleeve:none' } },
  { query: 'mutation { a: spawnSleeve(stackId: "stack:human:3:000000000002", kind: "ai") { embodimentType alive stack { id name } } }' },
];

const ask = async (g: Gateway, c: (typeof cases)[number]) => {
  const r = await g.server.executeOperation({ query: c.query, variables: c.variables, operationName: c.operationName }, { contextValue: newContext(p) });
  return JSON.parse(JSON.stringify(r.body.kind === 'single' ? r.body.singleResult : 'incremental'));
};

describe('compiled query plans', () => {
  it('answer as @apollo/gateway answers, from the second request of a query on', async () => {
    for (const c of cases) {
      const expected = await ask(apollo, c);
      const before = { ...compiled.plans! };
      for (let i = 0; i < 3; i++) expect(await ask(compiled, c), `${c.query} ${JSON.stringify(c.variables)} (request ${i + 1})`).toEqual(expected);
      expect(await ask(apollo, c)).toEqual(expected);
      // Once through Apollo's executor (the plan is made), then compiled.
      if (!c.refused) expect(compiled.plans!.compiled - before.compiled, c.query).toBeGreaterThanOrEqual(2);
    }
  });

  it('the cases cover data, bubbled nulls, errors with their subgraph, refused variables and mutations', async () => {
    const [bench, , , , , , , , , bubbled, , , , refusedByApollo, , refused, recallRefused, decommissionRefused, spawned] = await Promise.all(
      cases.map((c) => ask(compiled, c)),
    );
    expect(recallRefused.errors[0]).toMatchObject({ path: ['recall'], extensions: { code: 'NOT_FOUND', serviceName: 'memory' } });
    expect(decommissionRefused.errors[0]).toMatchObject({ path: ['decommissionSleeve'], extensions: { code: 'NOT_FOUND', serviceName: 'sleeves' } });
    // The sleeve from the sleeves subgraph, its stack an entity of the stacks subgraph's.
    expect(spawned).toEqual({ data: { a: { embodimentType: 'ai', alive: true, stack: { id: 'stack:human:3:000000000002', name: 's2' } } } });
    expect(refusedByApollo.errors[0].message).toContain('$n');
    expect(bench.data.stacks).toHaveLength(20);
    expect(bubbled.data).toBeNull();
    expect(bubbled.errors[0]).toMatchObject({ extensions: { code: 'BAD_REQUEST', serviceName: 'memory' }, path: ['stacks', 0, 'memory'] });
    expect(refused.errors[0].message).toContain('$n');
    expect(refused.data).toBeUndefined();
  });
});

describe("@apollo/gateway's unused dependencies", () => {
  it('stay stand-ins once both gateways run: the usage-reporting SDK and the cloud detectors are not loaded', async () => {
    // Both gateways above answered queries on both executors; what router/deferred-deps.ts defers
    // must still be its stand-in (a static import of a gateway helper once loaded them at start).
    expect((await compiled.server.executeOperation({ query: '{ stacks(first: 1) { id } }' })).body.kind).toBe('single');
    const { createRequire } = await import('node:module');
    const fromGateway = createRequire(createRequire(import.meta.url).resolve('@apollo/gateway'));
    const cache = (await import('node:module')).default as unknown as { _cache: Record<string, unknown> };
    for (const name of [
      '@opentelemetry/sdk-metrics',
      '@opentelemetry/exporter-metrics-otlp-http',
      '@opentelemetry/resource-detector-aws',
      'make-fetch-happen',
    ]) {
      const dir = fromGateway.resolve(name).replace(/(build\/src|lib)\/index\.js$/, '');
      // Only the stand-in sits at the package's entry; none of the package's own files was loaded.
      expect(Object.keys(cache._cache).filter((f) => f.startsWith(dir) && f !== fromGateway.resolve(name))).toEqual([]);
    }
  });

  it('make-fetch-happen loads on first use, as the gateway imports it (a remote subgraph gets its fetcher)', async () => {
    // The gateway takes it with TypeScript's __importDefault (a remote subgraph's data source) and
    // __importStar (the Uplink manager): the stand-in passes as an ES module, its `default` the package.
    const { createRequire } = await import('node:module');
    const fromGateway = createRequire(createRequire(import.meta.url).resolve('@apollo/gateway'));
    const standIn = fromGateway('make-fetch-happen') as { defaults: unknown; default: { defaults: unknown }; __esModule: boolean };
    expect(standIn.__esModule).toBe(true);
    const { RemoteGraphQLDataSource } = await import('@apollo/gateway');
    const source = new RemoteGraphQLDataSource({ url: 'http://127.0.0.1:9/graphql' });
    expect(typeof source.fetcher).toBe('function');
    expect(typeof standIn.defaults).toBe('function');
    expect(standIn.default.defaults).toBe(standIn.defaults);
    // Fetching through it reaches the network layer: a refused connection, not a TypeError.
    await expect(source.fetcher('http://127.0.0.1:9/graphql', { method: 'POST', body: '{}' })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
