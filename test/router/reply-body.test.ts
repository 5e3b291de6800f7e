// A large GraphQL result is answered from lib/json-body.ts's Buffer (router/reply-body.ts), a small
// one and one with errors from Apollo's own string: the same JSON either way, with its length and
// Apollo's headers, from the compiled plans and from @apollo/gateway's executor alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { stackRow } from '../helpers/stack-rows.ts';
import { createGateway, mountGraphql, type Gateway } from '../../router/gateway.ts';
import { createHttp } from '../../lib/http.ts';
import { newContext } from '../../lib/graphql.ts';

let p: TestPlatform;
const gateways: Gateway[] = [];
const apps: FastifyInstance[] = [];

beforeAll(async () => {
  p = await testPlatform({ COG_GRAPHQL_MAX_COST: '1000000', COG_GRAPHQL_COALESCE: 'off' });
  await p.db.prisma.stack.createMany({ data: Array.from({ length: 260 }, (_, i) => ({ ...stackRow(i), name: `ståck "${i}" ✓` })) });
  for (const compiledPlans of [true, false]) {
    const g = await createGateway(p, { compiledPlans });
    const app = createHttp({ name: 'reply-body-test', log: p.log });
    mountGraphql(app, g.server, p);
    await app.ready();
    gateways.push(g);
    apps.push(app);
  }
});
afterAll(async () => {
  for (const app of apps) await app.close();
  for (const g of gateways) await g.server.stop();
  await p?.cleanup();
});

const post = (app: FastifyInstance, query: string) =>
  app.inject({ method: 'POST', url: '/graphql', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ query }) });

describe('GraphQL reply bodies', () => {
  for (const [i, engine] of ['compiled plans', "@apollo/gateway's executor"].entries()) {
    it(`${engine}: a large result from parts, a small one and one with errors from Apollo's string, each the result Apollo answers`, async () => {
      const app = apps[i]!;
      const g = gateways[i]!;
      for (const [query, large] of [
        ['{ stacks(first: 250) { id name } }', true],
        ['{ stacks(first: 5) { id name } }', false],
        ['{ stacks(first: 250) { id name } a: stack(id: "stack:none") { id } }', true],
        ['{ stacks(first: 250) { id memory(first: 1, offset: -1) { cid } } }', false],
      ] as const) {
        // Twice each: the compiled plans take over from a query's second request.
        for (let n = 0; n < 2; n++) {
          const r = await post(app, query);
          const expected = await g.server.executeOperation({ query }, { contextValue: newContext(p) });
          const single = expected.body.kind === 'single' ? JSON.parse(JSON.stringify(expected.body.singleResult)) : null;
          expect(r.statusCode).toBe(200);
          expect(r.headers['content-type']).toMatch(/^application\/(graphql-response\+)?json/);
          expect(Number(r.headers['content-length'])).toBe(r.rawPayload.length);
          expect(r.json()).toEqual(single);
          // Apollo's string ends with a newline; the parts written here do not.
          expect(r.body.endsWith('\n')).toBe(!large || !!single.errors);
          if (large) expect(r.json().data.stacks).toHaveLength(250);
        }
      }
    });
  }
});
