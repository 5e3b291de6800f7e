import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { serverAudits } from 'graphql-http';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { startGateway } from '../../router/service.ts';
import type { RunningService } from '../../lib/service.ts';

let p: TestPlatform;
let gw: RunningService;

beforeAll(async () => {
  p = await testPlatform({
    GATEWAY_PORT: '0',
    COG_GRAPHQL_MAX_DEPTH: '6',
    COG_GRAPHQL_MAX_ALIASES: '3',
    COG_GRAPHQL_MAX_ROOT_FIELDS: '4',
    COG_GRAPHQL_MAX_TOKENS: '400',
    COG_GRAPHQL_MAX_COST: '500',
  });
  gw = await startGateway(p);
});
afterAll(async () => {
  await gw?.close();
  await p?.cleanup();
});

async function gql(query: string) {
  const r = await fetch(`${gw.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  return {
    status: r.status,
    body: (await r.json()) as { data?: unknown; errors?: { message: string; extensions?: { code?: string; [k: string]: unknown } }[] },
  };
}

describe('GraphQL over HTTP (graphql-http audit)', () => {
  it('passes every MUST of the audit suite', async () => {
    const audits = serverAudits({ url: `${gw.url}/graphql`, fetchFn: fetch });
    const failed: string[] = [];
    for (const audit of audits) {
      if (!audit.name.startsWith('MUST')) continue;
      const res = await audit.fn();
      if (res.status !== 'ok') failed.push(`${audit.name}: ${res.reason}`);
    }
    expect(failed).toEqual([]);
  });
});

describe('operation limits', () => {
  it('refuses a query deeper than the limit', async () => {
    const r = await gql('{ stacks { sleeves { stack { sleeves { stack { sleeves { stack { id } } } } } } } }');
    expect(r.body.errors?.[0].extensions?.code).toBe('QUERY_TOO_DEEP');
    expect(r.body.errors?.[0].extensions).toMatchObject({ limit: 6, actual: 8 });
    expect(r.body.errors?.[0].extensions).not.toHaveProperty('limitCode');
    expect(r.body.data).toBeUndefined();
  });
  it('refuses too many aliases', async () => {
    const r = await gql('{ a: stacksHealth { ok } b: stacksHealth { ok } c: stacksHealth { ok } d: stacksHealth { ok } }');
    expect(r.body.errors?.map((e) => e.extensions?.code)).toContain('TOO_MANY_ALIASES');
  });
  it('refuses too many root fields', async () => {
    const r = await gql('{ stacksHealth { ok } sleevesHealth { ok } memoryHealth { ok } chainsHealth { ok } economyHealth { ok } }');
    expect(r.body.errors?.[0].extensions?.code).toBe('TOO_MANY_ROOT_FIELDS');
  });
  it('refuses a query over the cost limit', async () => {
    const r = await gql('{ stacks(first: 1000) { id name } }');
    expect(r.body.errors?.[0].extensions?.code).toBe('QUERY_TOO_COSTLY');
  });
  it('refuses a document over the token limit', async () => {
    const r = await gql(`{ stacksHealth { ${'ok '.repeat(500)} } }`);
    expect(r.status).toBe(400);
    expect(r.body.errors?.[0].message).toMatch(/token/i);
  });
  it('serves what is inside every limit', async () => {
    const r = await gql('{ stacks(first: 5) { id sleeves { id } } stacksHealth { ok } }');
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data).toEqual({ stacks: [], stacksHealth: { ok: true } });
  });
  it('refuses bodies over 1 MiB with 413', async () => {
    const r = await fetch(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ stacksHealth { ok } }', variables: { pad: 'x'.repeat(1024 * 1024) } }),
    });
    expect(r.status).toBe(413);
  });
});
