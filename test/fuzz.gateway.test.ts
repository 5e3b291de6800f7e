// Property/fuzz test of the gateway (fast-check, bounded): every REST route the gateway registers
// (enumerated from fastify, router/service.ts gatewayRoutes) and a set of GraphQL operations, driven
// with random and malformed input: wrong types, huge and unicode strings, nested junk, invalid JSON,
// wrong content types, unknown ids, negative/NaN/huge numbers, odd path parameters.
// Properties: no 5xx but 503, the gateway never crashes, every REST error is problem+json
// {type, title, status, detail, code}, no GraphQL error is an internal one, and a refused request
// changes nothing (database snapshot before and after), and every status a REST route answers is
// one openapi.json lists for it.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { gatewayRoutes, type GatewayRoute } from '../router/service.ts';
import { openapiFile } from '../bin/openapi.ts';
import { startNeedlecast } from '../subgraphs/sleeves/needlecast/service.ts';
import type { RunningService } from '../lib/service.ts';
import { call, enc, isProblem, secureGateway, snapshot, type Res, type SecureGateway } from './helpers/secure-gateway.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 25);
const openapi = JSON.parse(fs.readFileSync(openapiFile, 'utf8')) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
const NOWHERE = 'http://127.0.0.1:9'; // nothing listens: dependencies other than Hippocampus/Needlecast are "down"

let g: SecureGateway;
let needlecast: RunningService;
let routes: GatewayRoute[];
const ids: string[] = [
  'stack:none',
  'sleeve:none',
  'stack:human:1:000000000000',
  'sleeve:ai:1:00000000',
  'stack:0x' + '0'.repeat(40),
  'cog://' + '0'.repeat(64) + '@0',
  'residue:none',
  'needle:00',
];
const real: string[] = [];
let last: string;
/** Ids picked at generation time (the real ones exist only after beforeAll). */
const pick = (from: string[]) => fc.nat().map((i) => from[i % from.length] ?? 'stack:none');

beforeAll(async () => {
  g = await secureGateway({
    MEDULLA_URL: NOWHERE,
    DHF_URL: NOWHERE,
    THALAMUS_URL: NOWHERE,
    TREASURY_URL: NOWHERE,
    FAUCET_URL: NOWHERE,
    CORTEX_URL: NOWHERE,
    NEEDLECAST_PORT: '0',
    COG_RATE_LIMIT_PER_MIN: '0',
  });
  needlecast = await startNeedlecast(g.p);
  g.p.config.urls.needlecast = needlecast.url!;
  routes = gatewayRoutes(g.gateway).filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS');
  // real ids for the fuzzer to hit: a stack with sleeves (one decommissioned) and a memory
  const stack = (await call(g.url, 'POST', '/v1/stacks', { name: 'fuzz' })).body;
  const s1 = (await call(g.url, 'POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'ai' })).body;
  const s2 = (await call(g.url, 'POST', `/v1/sleeves/${enc(stack.id)}`, { kind: 'human' })).body;
  const dead = (await call(g.url, 'POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'memory' })).body;
  await call(g.url, 'DELETE', `/v1/sleeves/${enc(dead.id)}`);
  const cid = (await call(g.url, 'POST', `/v1/sleeves/${enc(s1.id)}/perceive`, { input: 'seed' })).body.cid;
  real.push(stack.id, s1.id, s2.id, dead.id, cid);
  ids.push(...real);
  last = await snapshot(g.p);
}, 120_000);
afterAll(async () => {
  if (process.env.FUZZ_TALLY)
    console.log(
      [...tally]
        .sort()
        .map(([k, n]) => `${k}: ${n}`)
        .join('\n'),
    );
  await needlecast?.close();
  await g?.close();
});

// ------------------------------------------------------------------ arbitraries
const oddStrings = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  '\ud800',
  '../../etc/passwd',
  '%00',
  '%zz',
  '..',
  '.',
  '🧠'.repeat(40),
  '\'; DROP TABLE "Stack"; --',
  '${jndi:ldap://x}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'null',
  'NaN',
  '-1',
  '1e309',
  'a'.repeat(700),
  'Ω≈ç√∫˜µ≤≥÷',
  '\r\nX-Injected: 1',
);
const str = fc.oneof(
  { weight: 3, arbitrary: pick(ids) },
  { weight: 3, arbitrary: oddStrings },
  { weight: 2, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ minLength: 1000, maxLength: 3000 }) },
);
const num = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: false }),
  fc.constantFrom(-1, 0, 1, 2, 8, 1.5, -0.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, 2 ** 31, -(2 ** 31) - 1),
);
const scalar = fc.oneof(str, num, fc.boolean(), fc.constant(null));
const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), scalar, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
);
const FIELDS = [
  'stackId',
  'sleeveId',
  'text',
  'input',
  'depth',
  'name',
  'kind',
  'pubkey',
  'cpv',
  'embodimentType',
  'hostname',
  'tickRate',
  'from',
  'to',
  'fromSleeveId',
  'toSleeveKind',
  'toTickRate',
  'claimant',
  'proof',
  'pin',
  'memoryToken',
  'sagaId',
  '__proto__',
  'id',
] as const;
const nested = (depth: number, open: string, close: string) => open.repeat(depth) + close.repeat(depth);
const bodyText: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 6, arbitrary: fc.dictionary(fc.constantFrom(...FIELDS), value, { maxKeys: 6 }).map((o) => JSON.stringify(o)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '{',
      '{"a":',
      'NaN',
      '[1,2',
      '{"depth": NaN}',
      '{"depth": Infinity}',
      '{"text": "\\ud800"}',
      '\u0000',
      'null',
      '"str"',
      '[]',
      '{"__proto__": {"polluted": 1}}',
      '{"constructor": {"prototype": {"polluted": 1}}}',
      'name=x&stackId=y',
      '\ufeff{}',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      nested(3000, '[', ']'),
      `{"stackId": ${nested(2000, '{"a":', '}').replace(/}$/, '1}')}}`,
      nested(200, '{"input":', '}').replace(/:}/, ':"x"}'),
    ),
  },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constant('HUGE') },
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/problem+json',
  undefined,
);
const query = fc.dictionary(
  fc.constantFrom('depth', 'memoryToken', 'limit', 'status', 'kind', 'stackId', 'since', 'first', 'x'),
  fc.oneof(str, num.map(String)),
  { maxKeys: 3 },
);
// Nearly valid bodies per route: each field either a plausible value or junk, so requests also get
// past validation into the domain (and some are accepted, moving the baseline).
const idOf = fc.oneof({ weight: 3, arbitrary: pick(real) }, { weight: 1, arbitrary: pick(ids) });
const kind = fc.constantFrom('human', 'ai', 'mining', 'memory');
const maybe = <T>(good: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: good as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: value });
const shortText = fc.string({ maxLength: 30 });
const TEMPLATES: Record<string, Record<string, fc.Arbitrary<unknown>>> = {
  'POST /v1/stacks': { name: maybe(shortText), kind: maybe(kind) },
  'POST /v1/sleeves': { stackId: maybe(idOf), embodimentType: maybe(kind), hostname: maybe(shortText) },
  'POST /v1/sleeves/:stackId': { kind: maybe(kind), tickRate: maybe(fc.integer({ min: 100, max: 10_000 })) },
  'POST /v1/sleeves/:id/perceive': { input: maybe(shortText) },
  'POST /v1/perceive': { stackId: maybe(idOf), sleeveId: maybe(idOf), text: maybe(shortText) },
  'POST /v1/stacks/:id/remember': { text: maybe(shortText), pin: maybe(fc.boolean()) },
  'POST /v1/sleeves/:id/remember': { text: maybe(shortText), pin: maybe(fc.boolean()) },
  'POST /v1/recall': { stackId: maybe(idOf), depth: maybe(fc.integer({ min: 0, max: 10 })), sleeveId: maybe(idOf) },
  'POST /v1/needlecast': { from: maybe(idOf), to: maybe(fc.oneof(idOf, kind)) },
  'POST /v1/coordination/residues/:id/proof': { claimant: maybe(idOf), proof: maybe(fc.dictionary(fc.string({ maxLength: 8 }), scalar, { maxKeys: 3 })) },
  'POST /v1/faucet/drip': { stackId: maybe(idOf) },
  'POST /v1/treasury/claim': { stackId: maybe(idOf) },
};
const templateBody = (key: string): fc.Arbitrary<string | undefined> | undefined => {
  const t = TEMPLATES[key];
  return t && fc.oneof({ weight: 3, arbitrary: fc.record(t) }, { weight: 1, arbitrary: fc.record(t, { requiredKeys: [] }) }).map((o) => JSON.stringify(o));
};
const queryFor = (url: string) =>
  url.endsWith('/recall')
    ? fc.oneof(
        query,
        fc.record(
          { depth: fc.oneof(fc.integer({ min: -2, max: 12 }).map(String), str), memoryToken: fc.oneof(fc.double().map(String), str) },
          { requiredKeys: ['depth'] },
        ),
      )
    : query;
const HUGE = JSON.stringify({ text: 'x'.repeat(1024 * 1024 + 10), input: 'x' });
const expand = (b: string | undefined) => (b === 'HUGE' ? HUGE : b);

/** encodeURIComponent, or byte-wise percent-encoding for strings it refuses (lone surrogates). */
const safeEnc = (v: string) => {
  try {
    return enc(v);
  } catch {
    return [...Buffer.from(v, 'utf8')].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
  }
};

/** The path with each `:param` replaced by a fuzzed value (usually encoded, sometimes raw). */
const pathFor = (url: string) => {
  const params = url.match(/:[A-Za-z]+/g) ?? [];
  return fc
    .tuple(fc.array(fc.tuple(str, fc.boolean()), { minLength: params.length, maxLength: params.length }), url.includes('*') ? str : fc.constant(''))
    .map(([vals, star]) => {
      let i = 0;
      let out = url.replace(/:[A-Za-z]+/g, () => {
        const [v, raw] = vals[i++];
        return raw ? v.replace(/[/?#\s]/g, '_') || 'x' : safeEnc(v);
      });
      if (out.includes('*')) out = out.replace('*', safeEnc(star));
      return out;
    });
};

// ------------------------------------------------------------------ properties
async function send(method: string, path: string, body: string | undefined, type: string | undefined): Promise<Res> {
  const headers: Record<string, string> = {};
  if (type && body !== undefined) headers['content-type'] = type;
  const r = await fetch(g.url + path, { method, headers, body: method === 'GET' ? undefined : body });
  const text = await r.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: r.status, body: parsed, text: text.slice(0, 500), headers: r.headers };
}

/** No 5xx but 503; refusals are problems and change nothing; acceptances move the baseline. */
const tally = new Map<string, number>();
async function check(label: string, r: Res, graphql = false): Promise<void> {
  const key = `${label.split(' as ')[0].split(' ').slice(0, 2).join(' ')} ${r.status}`;
  tally.set(key, (tally.get(key) ?? 0) + 1);
  expect(r.status >= 500 && r.status !== 503, `${label} -> ${r.status} ${r.text}`).toBe(false);
  let refused = r.status >= 400;
  if ((graphql && r.status < 400) || (graphql && !(r.headers.get('content-type') ?? '').includes('problem+json'))) {
    const errors = (r.body?.errors ?? []) as Array<{ message?: unknown; extensions?: { code?: string } }>;
    for (const e of errors) {
      expect(typeof e.message, label).toBe('string');
      expect(['INTERNAL_SERVER_ERROR', 'INTERNAL'], `${label}: ${JSON.stringify(e)}`).not.toContain(e.extensions?.code);
    }
    const data = r.body?.data as Record<string, unknown> | null | undefined;
    refused = r.status >= 400 || (errors.length > 0 && (!data || Object.values(data).every((v) => v === null)));
  } else if (refused) {
    expect(isProblem(r), `${label} -> ${r.status} not a problem: ${r.headers.get('content-type')} ${r.text}`).toBe(true);
  }
  const now = await snapshot(g.p);
  if (refused) expect(now, `${label} -> ${r.status} was refused but changed state: ${r.text}`).toBe(last);
  last = now;
}

const bodyFor = (route: GatewayRoute): fc.Arbitrary<string | undefined> => {
  if (route.method === 'GET') return fc.constant(undefined);
  const t = templateBody(`${route.method} ${route.url}`);
  return t ? fc.oneof({ weight: 2, arbitrary: t }, { weight: 2, arbitrary: bodyText }) : bodyText;
};

describe('fuzz: REST', () => {
  it('drives every registered REST route with random and malformed input', async () => {
    const rest = routes.filter((r) => r.url !== '/graphql');
    expect(rest.length).toBeGreaterThan(25);
    for (const route of rest) {
      await fc.assert(
        fc.asyncProperty(pathFor(route.url), queryFor(route.url), bodyFor(route), contentType, async (path, q, body, type) => {
          const qs = new URLSearchParams(q as Record<string, string>).toString();
          const full = path + (qs ? `?${qs}` : '');
          const r = await send(route.method, full, expand(body), type);
          const label = `${route.method} ${route.url} as ${full.slice(0, 200)} body ${String(body).slice(0, 200)} (${type})`;
          await check(label, r);
          // The status is one the OpenAPI document lists for the route (unless the odd path
          // reached no route at all).
          const op = openapi.paths[route.url.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()];
          if (op && r.body?.code !== 'ROUTE_NOT_FOUND' && r.status !== 405) {
            expect(Object.keys(op.responses), `${label} -> ${r.status}, which openapi.json does not list: ${r.text}`).toContain(String(r.status));
          }
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    }
  }, 120_000);

  it('wrong methods, unknown and odd paths are problem+json and change nothing', async () => {
    const method = fc.constantFrom('PUT', 'PATCH', 'DELETE', 'POST', 'GET');
    const pathArb = fc.oneof(
      fc.constantFrom(...routes.map((r) => r.url)).chain((u) => pathFor(u)),
      fc.string({ maxLength: 60 }).map((s) => '/v1/' + safeEnc(s)),
      fc.constantFrom('/v1/', '/v1//stacks', '/v1/stacks/%', '/v1/stacks/%zz', '/v1/sleeves/a%2Fb/perceive', '/%2e%2e/etc', '/v1/stacks/' + 'x'.repeat(600)),
    );
    await fc.assert(
      fc.asyncProperty(method, pathArb, bodyText, async (m, path, body) => {
        const r = await send(m, path, m === 'GET' ? undefined : expand(body), 'application/json');
        await check(`${m} ${path.slice(0, 200)}`, r, path.startsWith('/graphql'));
      }),
      { numRuns: RUNS * 2, endOnFailure: true },
    );
  }, 60_000);
});

// ------------------------------------------------------------------ GraphQL
type Op = { query: string; vars: Record<string, fc.Arbitrary<unknown>> };
const id = fc.oneof({ weight: 3, arbitrary: pick(real) }, { weight: 1, arbitrary: str }, { weight: 1, arbitrary: value });
const OPS: Op[] = [
  { query: 'query($id: ID!) { stack(id: $id) { id name epoch sleeves { id drift } } }', vars: { id } },
  { query: 'query($f: Int) { stacks(first: $f) { id } }', vars: { f: value } },
  { query: 'query($id: ID!) { sleeve(id: $id) { id drift alive } }', vars: { id } },
  { query: 'query($h: Int!) { block(height: $h) { height } }', vars: { h: value } },
  { query: 'query($s: ID!) { balances(stackId: $s) { __typename } tokenBalances(stackId: $s) { __typename } }', vars: { s: id } },
  { query: 'query($s: ID!, $f: Int) { issuance(stackId: $s, first: $f) { __typename } }', vars: { s: id, f: value } },
  { query: 'query($c: ID!) { memoryNode(cid: $c) { cid epoch } }', vars: { c: id } },
  { query: 'query($s: ID!, $l: ID!, $d: Int!) { reconstruct(stackId: $s, sleeveId: $l, depth: $d) { fidelity } }', vars: { s: id, l: id, d: value } },
  { query: 'query($id: ID!) { residue(id: $id) { id } saga(id: $id) { __typename } }', vars: { id } },
  {
    query: 'query($f: Int, $st: String, $k: String, $s: ID) { residues(first: $f, status: $st, kind: $k, stackId: $s) { id } }',
    vars: { f: value, st: value, k: value, s: value },
  },
  { query: '{ desync { id } sleeves { id } hippocampusStats { nodes } currentEpoch { epoch } }', vars: {} },
  { query: 'mutation($s: ID!, $t: String!, $st: ID) { perceive(sleeveId: $s, text: $t, stackId: $st) { cid } }', vars: { s: id, t: value, st: value } },
  {
    query: 'mutation($s: ID, $l: ID, $t: String!, $p: Boolean) { remember(stackId: $s, sleeveId: $l, text: $t, pin: $p) { __typename } }',
    vars: { s: value, l: value, t: value, p: value },
  },
  {
    query: 'mutation($s: ID!, $d: Int!, $l: ID, $m: Float) { recall(stackId: $s, depth: $d, sleeveId: $l, memoryToken: $m) { fidelity } }',
    vars: { s: id, d: value, l: value, m: value },
  },
  {
    query:
      'mutation($s: ID!, $e: String, $k: String, $h: String, $r: Int) { spawnSleeve(stackId: $s, embodimentType: $e, kind: $k, hostname: $h, tickRate: $r) { id } }',
    vars: { s: id, e: value, k: value, h: value, r: value },
  },
  { query: 'mutation($id: ID!) { syncSleeve(id: $id) { __typename } }', vars: { id } },
  { query: 'mutation($id: ID!) { decommissionSleeve(id: $id) { id } }', vars: { id } },
  {
    query: 'mutation($n: String, $k: String, $p: String) { createStack(name: $n, kind: $k, pubkey: $p) { stack { id } } }',
    vars: { n: value, k: value, p: value },
  },
  { query: 'mutation($s: ID!) { faucetDrip(stackId: $s) { __typename } }', vars: { s: id } },
  { query: 'mutation($s: ID!) { claimEmissions(stackId: $s) { __typename } }', vars: { s: id } },
  { query: 'mutation($id: ID!, $c: ID!, $p: JSON) { submitResidueProof(id: $id, claimant: $c, proof: $p) { id } }', vars: { id, c: id, p: value } },
  { query: 'mutation { mineBlock { height } }', vars: {} },
];
const junkDocs = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.constantFrom(
    '{',
    'query {',
    '{ stacks { ' + 'sleeves { stack { '.repeat(40),
    '{ ' + 'a: __typename '.repeat(500) + '}',
    'subscription { x }',
    'mutation',
    '{ __schema { types { name } } }',
    'query A { __typename } query B { __typename }',
    '{ stack(id: 5) { id } }',
    '{ stack(id: "x") { nope } }',
  ),
);
const gqlRequest: fc.Arbitrary<{ body: string | undefined; type?: string; method: string; label: string }> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .constantFrom(...OPS)
      .chain((op) =>
        fc.record(op.vars).map((vars) => ({ body: JSON.stringify({ query: op.query, variables: vars }), method: 'POST', label: op.query.slice(0, 60) })),
      ),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({ query: fc.oneof(junkDocs, value), variables: value, operationName: value })
      .map((b) => ({ body: JSON.stringify(b), method: 'POST', label: 'junk doc' })),
  },
  { weight: 1, arbitrary: bodyText.map((b) => ({ body: expand(b), method: 'POST', label: 'junk body' })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...OPS), contentType)
      .map(([op, type]) => ({ body: JSON.stringify({ query: op.query }), type, method: 'POST', label: `content-type ${type}` })),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...OPS).map((op) => ({ body: JSON.stringify([{ query: op.query }, { query: op.query }]), method: 'POST', label: 'batch' })),
  },
  {
    weight: 1,
    arbitrary: fc
      .oneof(junkDocs, fc.constantFrom(...OPS.map((o) => o.query)))
      .map((q) => ({ body: undefined, method: `GET?${new URLSearchParams({ query: q })}`, label: 'GET' })),
  },
);

describe('fuzz: GraphQL', () => {
  it('random and malformed operations never fail internally and refused ones change nothing', async () => {
    await fc.assert(
      fc.asyncProperty(gqlRequest, async (req) => {
        const [method, search] = req.method.split('?');
        // Apollo's CSRF prevention wants a preflight-forcing header on GET and non-JSON POSTs
        const headers: Record<string, string> = { 'apollo-require-preflight': 'true' };
        if (req.body !== undefined) headers['content-type'] = req.type ?? 'application/json';
        const r0 = await fetch(`${g.url}/graphql${search ? `?${search}` : ''}`, { method, headers, body: req.body });
        const text = await r0.text();
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        await check(`graphql ${req.label} ${String(req.body).slice(0, 300)}`, { status: r0.status, body, text: text.slice(0, 500), headers: r0.headers }, true);
      }),
      { numRuns: RUNS * 10, endOnFailure: true },
    );
  }, 90_000);

  it('an empty operationName is read as absent (Apollo answered it with a 500)', async () => {
    for (const query of ['{ __schema { types { name } } }', '{ stacks(first: 1) { id } }']) {
      for (const [method, init] of [
        [
          'POST',
          { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, operationName: '', variables: { '': null } }) },
        ],
        ['GET', { method: 'GET', headers: { 'apollo-require-preflight': 'true' } }],
      ] as const) {
        const search = method === 'GET' ? `?${new URLSearchParams({ query, operationName: '' })}` : '';
        const r = await fetch(`${g.url}/graphql${search}`, init);
        const body = (await r.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
        expect(r.status, `${method} ${query}: ${JSON.stringify(body).slice(0, 300)}`).toBe(200);
        expect(body.errors).toBeUndefined();
        expect(Object.keys(body.data ?? {})).toHaveLength(1);
      }
    }
  });

  it('the gateway is still healthy and an accepted write still moves the snapshot', async () => {
    expect((await call(g.url, 'GET', '/healthz')).status).toBe(200);
    const before = await snapshot(g.p);
    const created = await call(g.url, 'POST', '/v1/stacks', { name: 'after fuzz' });
    expect(created.status).toBe(201);
    expect(await snapshot(g.p)).not.toBe(before);
  });
});
