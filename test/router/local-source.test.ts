// The in-process data source runs subgraph operations compiled by graphql-jit (router/local-source.ts):
// each operation answers what graphql-js's execute answers over the same schema, data and errors
// alike (values, nulls bubbling to the nearest nullable field, error messages, paths and
// extensions), for root fields, entity fetches (the gateway's _entities with representations),
// unknown entities, Problems thrown by resolvers, and refused operations.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GraphQLSchema } from 'graphql';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { newContext } from '../../lib/graphql.ts';
import { buildSubgraph, readSupergraphConfig } from '../../router/subgraphs.ts';
import { InProcessDataSource } from '../../router/local-source.ts';
import { seed } from '../helpers/router-seed.ts';

let p: TestPlatform;
const schemas = new Map<string, GraphQLSchema>();

beforeAll(async () => {
  p = await testPlatform();
  await seed(p);
  await p.db.prisma.sleeve.update({ where: { id: 'sleeve:ai:1:00000000' }, data: { alive: false, finalTokens: { compute: 1.5 }, driftMilli: 1234 } });
  for (const s of readSupergraphConfig()) schemas.set(s.name, await buildSubgraph(s));
});
afterAll(async () => {
  await p?.cleanup();
});

const stack = (i: number) => ({ __typename: 'Stack', id: `stack:human:${i + 1}:${i.toString(16).padStart(12, '0')}` });
const reps = [stack(0), stack(1), { __typename: 'Stack', id: 'stack:none' }, stack(19)];
const entities = (selection: string) => `query($representations: [_Any!]!) { _entities(representations: $representations) { ... on Stack { ${selection} } } }`;

const cases: Array<[subgraph: string, query: string, variables?: Record<string, unknown>]> = [
  [
    'stacks',
    '{ stacks(first: 5) { __typename id tokenId name kind pubKey cpv { syncCoeff routingCoeff } binding { floor } createdAt chainStatus head { cid } } }',
  ],
  ['stacks', '{ a: stack(id: "stack:none") { id } b: stack(id: "stack:human:2:000000000001") { id name lastActiveEpoch } }'],
  ['stacks', entities('__typename id name epoch'), { representations: reps }],
  [
    'sleeves',
    entities('sleeves { id stackId embodimentType kind alive frozen drift lastSync tokens { compute memory } identityUrl }'),
    { representations: reps },
  ],
  ['sleeves', '{ sleeve(id: "sleeve:ai:2:00000001") { id drift tokens { compute } stack { id } } none: sleeve(id: "sleeve:none") { id } }'],
  ['sleeves', 'query Q($id: ID!) { tokenBalances(stackId: $id) { stackId sleeveTotals { compute } } }', { id: stack(0).id }],
  ['economy', entities('balances { compute memory sync routing residue }'), { representations: reps }],
  ['memory', entities('memory(first: 2) { cid epoch links kind pinned readableUntilEpoch }'), { representations: reps }],
  // A Problem thrown in an entity's non-null list field: the entity is null, the error keeps its code.
  ['memory', entities('id memory(first: 2, offset: -1) { cid }'), { representations: reps }],
  ['memory', '{ memoryNode(cid: "cog://none@0") { cid } }'],
  // Refused before it runs.
  ['stacks', '{ stacks(first: 5) { nope } }'],
  ['stacks', '{ stacks(first: 5) { id }'],
];

describe('in-process subgraph operations, compiled and not', () => {
  it('answer alike', async () => {
    for (const [name, query, variables] of cases) {
      const schema = schemas.get(name)!;
      const run = async (jit: boolean) => {
        const r = await new InProcessDataSource(schema, { jit }).process({
          kind: 'incoming operation' as never,
          request: { query, variables },
          context: newContext(p),
          incomingRequestContext: {} as never,
        });
        return JSON.parse(JSON.stringify({ data: r.data, errors: r.errors?.map((e) => ({ message: e.message, path: e.path, extensions: e.extensions })) }));
      };
      const compiled = await run(true);
      expect(compiled, `${name}: ${query}`).toEqual(await run(false));
      // Twice: the second run reuses the compiled operation.
      expect(await run(true)).toEqual(compiled);
    }
  });

  it('the cases cover data, nulls and errors', async () => {
    const run = (name: string, query: string, variables?: Record<string, unknown>) =>
      new InProcessDataSource(schemas.get(name)!).process({
        kind: 'incoming operation' as never,
        request: { query, variables },
        context: newContext(p),
        incomingRequestContext: {} as never,
      });
    const sleeves = (await run('sleeves', entities('sleeves { id drift tokens { compute } }'), { representations: reps })).data as {
      _entities: Array<{ sleeves: Array<{ id: string; drift: number; tokens: { compute: number } }> }>;
    };
    expect(sleeves._entities[0]!.sleeves[0]).toEqual({ id: 'sleeve:ai:1:00000000', drift: 1.234, tokens: { compute: 1.5 } });
    expect(sleeves._entities[2]!.sleeves).toEqual([]);
    const bad = await run('memory', entities('id memory(first: 2, offset: -1) { cid }'), { representations: reps });
    expect((bad.data as { _entities: unknown[] })._entities).toEqual([null, null, null, null]);
    expect(bad.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    expect(bad.errors?.[0]?.path).toEqual(['_entities', 0, 'memory']);
    expect((await run('stacks', '{ stacks(first: 5) { nope } }')).errors?.[0]?.message).toContain('nope');
  });
});
