// The gateway's OpenAPI document (compat-rest/openapi.ts) against what the gateway answers:
//   * openapi.json at the root is the generated document (npm run openapi), and the gateway serves it;
//   * every route the gateway registers (but GraphQL and the reference page) is in it, with responses;
//   * real requests to every route, success and error statuses, each answer checked with ajv
//     against the document: the status is documented for the operation, the content type too, and
//     the body validates, with every object the document does not declare open treated as closed
//     (so a field a route answers and the document leaves out fails here).
// One real gateway (router/service.ts) on a test platform with the Hippocampus, the Needlecast
// Router and a Medulla node in-process, plus a second gateway on the same platform with
// COG_AUTH=required for the 401s.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsImport from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import { buildOpenapi, openapiFile, openapiText } from '../bin/openapi.ts';
import { gatewayRoutes, startGateway } from '../router/service.ts';
import { startNeedlecast } from '../subgraphs/sleeves/needlecast/service.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { openResidue } from '../subgraphs/residues/open.ts';
import { burn, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { generateIdentity } from '../lib/crypto.ts';
import type { RunningService } from '../lib/service.ts';
import { call, enc, secureGateway, type Res, type SecureGateway } from './helpers/secure-gateway.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv2020) => Ajv2020;

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>; components: unknown };
type Json = Record<string, unknown>;

let g: SecureGateway;
let signedGateway: RunningService;
let needlecast: RunningService;
let medulla: MedullaService | undefined;
let doc: Doc;

/** Every object schema without an explicit additionalProperties, closed; refs into the document. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema as Json)) {
    if (k === '$ref' && typeof v === 'string' && v.startsWith('#/')) out[k] = `doc${v}`;
    else if (k === 'properties' && v && typeof v === 'object') out[k] = Object.fromEntries(Object.entries(v as Json).map(([p, s]) => [p, closed(s)]));
    else out[k] = closed(v);
  }
  if (out.type === 'object' && out.properties && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
const validators = new Map<string, ValidateFunction>();
function validatorFor(key: string, schema: unknown): ValidateFunction {
  let v = validators.get(key);
  if (!v) validators.set(key, (v = ajv.compile(closed(schema) as Json)));
  return v;
}

/** The document's path template a concrete path falls under, for the method. */
function templateOf(path: string, method: string): string | undefined {
  const matches = Object.keys(doc.paths).filter((t) => doc.paths[t]![method] && new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path));
  // A literal segment beats a parameter (/v1/sleeves/x/sync is not /v1/sleeves/{stackId}).
  return matches.sort((a, b) => a.split('{').length - b.split('{').length)[0];
}

/** Which (operation, status) pairs the run saw. */
const seen = new Map<string, Set<number>>();

/** Sends one request and checks its answer against the document; returns it. */
async function check(method: string, path: string, body?: unknown, opts: { base?: string; status?: number } = {}): Promise<Res> {
  const r = await call(opts.base ?? g.url, method, path, body);
  const what = `${method} ${path} -> ${r.status} ${r.text.slice(0, 300)}`;
  if (opts.status !== undefined) expect(r.status, what).toBe(opts.status);
  const template = templateOf(path.split('?')[0]!, method.toLowerCase());
  expect(template, `${what}: no path of the document`).toBeDefined();
  const op = doc.paths[template!]![method.toLowerCase()];
  expect(op, `${what}: no ${method} operation on ${template}`).toBeDefined();
  const response = op!.responses[String(r.status)];
  expect(response, `${what}: status not documented (has ${Object.keys(op!.responses).join(', ')})`).toBeDefined();
  const type = (r.headers.get('content-type') ?? '').split(';')[0]!.trim();
  const media = response!.content?.[type];
  expect(media, `${what}: content type ${type} not documented (has ${Object.keys(response!.content ?? {}).join(', ')})`).toBeDefined();
  const validate = validatorFor(`${template} ${method} ${r.status} ${type}`, media!.schema);
  expect(validate(r.body), `${what}\n${JSON.stringify(validate.errors, null, 1)}`).toBe(true);
  const key = `${method} ${template}`;
  seen.set(key, (seen.get(key) ?? new Set()).add(r.status));
  return r;
}

beforeAll(async () => {
  doc = JSON.parse(fs.readFileSync(openapiFile, 'utf8')) as Doc;
  ajv.addSchema({ $id: 'doc', components: closed(doc.components) } as Json);
  g = await secureGateway({ NEEDLECAST_PORT: '0', COG_RATE_LIMIT_PER_MIN: '0' });
  needlecast = await startNeedlecast(g.p);
  g.p.config.urls.needlecast = needlecast.url!;
  medulla = await createMedulla(g.p, { port: 0, autoMine: false, genesisDifficulty: 1, node: 'openapi-test' });
  g.p.config.urls.medulla = medulla.url;
  // Same platform, signatures required: the 401s.
  signedGateway = await startGateway({ ...g.p, config: { ...g.p.config, auth: 'required' } });
}, 180_000);
afterAll(async () => {
  await signedGateway?.close();
  await medulla?.close();
  await needlecast?.close();
  await g?.close();
});

describe('OpenAPI document', () => {
  it('openapi.json is the generated document (run npm run openapi when this fails), and the gateway serves it', async () => {
    expect(fs.readFileSync(openapiFile, 'utf8')).toBe(openapiText(await buildOpenapi()));
    const served = await check('GET', '/v1/openapi.json', undefined, { status: 200 });
    expect(served.body).toEqual(doc);
    expect(doc).toMatchObject({ openapi: '3.1.0' });
  }, 60_000);

  it('describes every REST route of the gateway, each with a success and its error statuses', () => {
    const routes = gatewayRoutes(g.gateway).filter(
      (r) => r.method !== 'HEAD' && (r.url.startsWith('/v1/') || r.url === '/healthz') && !r.url.startsWith('/v1/docs'),
    );
    expect(routes.length).toBeGreaterThan(25);
    for (const r of routes) {
      const template = r.url.replace(/:([A-Za-z]+)/g, '{$1}');
      const op = doc.paths[template]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.url} is not in the document`).toBeDefined();
      const statuses = Object.keys(op!.responses);
      expect(
        statuses.some((s) => s.startsWith('2')),
        `${r.method} ${r.url}`,
      ).toBe(true);
      expect(statuses, `${r.method} ${r.url}`).toContain('500');
      if (r.url.startsWith('/v1/')) expect(statuses, `${r.method} ${r.url}`).toEqual(expect.arrayContaining(['429', '503']));
    }
    // Every operation named, once (generated clients name their functions by it).
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((op) => (op as { operationId?: string }).operationId));
    expect(
      ids.every((i) => typeof i === 'string' && /^[a-z][A-Za-z0-9]+$/.test(i)),
      String(ids),
    ).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // One Problem schema for every error, with the 402 members.
    const problem = (doc.components as { schemas: Record<string, { properties: Json; required: string[] }> }).schemas.Problem!;
    expect(Object.keys(problem.properties)).toEqual(
      expect.arrayContaining(['type', 'title', 'status', 'detail', 'code', 'errors', 'token', 'required', 'available']),
    );
    expect(problem.required).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail', 'code']));
  });

  it('serves a reference page whose assets come from this gateway (no CDN)', async () => {
    const page = await fetch(`${g.url}/v1/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    const html = await page.text();
    const srcs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(srcs.length).toBe(3);
    for (const s of srcs) {
      expect(s.startsWith('/v1/docs/assets/'), s).toBe(true);
      const a = await fetch(g.url + s);
      expect(a.status, s).toBe(200);
      expect((await a.arrayBuffer()).byteLength, s).toBeGreaterThan(10);
    }
    const init = await (await fetch(`${g.url}/v1/docs/assets/init.js`)).text();
    expect(init).toContain('/v1/openapi.json');
    expect(init).toContain('validatorUrl: null');
    const missing = await fetch(`${g.url}/v1/docs/assets/nope.js`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });
});

describe('every route answers what the document says', () => {
  it('stacks, sleeves, memory, economy, residues, needlecast, chains: success and error statuses', async () => {
    const huge = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) });
    await check('GET', '/healthz', undefined, { status: 200 });

    // stacks
    const stack = (await check('POST', '/v1/stacks', { name: 'openapi' }, { status: 201 })).body;
    expect(stack.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    const other = (await check('POST', '/v1/stacks', { name: 'other' }, { status: 201 })).body;
    const id = generateIdentity();
    const cpv = { syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1, residueCoeff: 1, routingCoeff: 1 };
    await check('POST', '/v1/stacks', { pubkey: id.pubKey, cpv }, { status: 201 });
    await check('POST', '/v1/stacks', { pubkey: id.pubKey, cpv }, { status: 409 });
    await check('POST', '/v1/stacks', { name: 5 }, { status: 400 });
    await check('POST', '/v1/stacks', '{"name":', { status: 400 });
    await check('POST', '/v1/stacks', huge, { status: 413 });
    await check('GET', '/v1/stacks', undefined, { status: 200 });
    await check('GET', `/v1/stacks/${enc(stack.id)}`, undefined, { status: 200 });
    await check('GET', '/v1/stacks/stack:none', undefined, { status: 404 });
    await check('GET', `/v1/stacks/${enc(stack.id)}/registration.json`, undefined, { status: 200 });
    await check('GET', '/v1/stacks/stack:none/registration.json', undefined, { status: 404 });
    await check('GET', `/v1/stacks/${'x'.repeat(400)}`, undefined, { status: 400 });
    const long = await check('GET', `/v1/stacks/${'x'.repeat(600)}`, undefined, { status: 414 });
    expect(long.body).toMatchObject({ status: 414, code: 'URI_TOO_LONG' });

    // sleeves
    const ai = (await check('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'ai', hostname: 'h1' }, { status: 201 })).body;
    const human = (await check('POST', `/v1/sleeves/${enc(stack.id)}`, { kind: 'human' }, { status: 201 })).body;
    const foreign = (await check('POST', '/v1/sleeves', { stackId: other.id, embodimentType: 'ai' }, { status: 201 })).body;
    await check('POST', '/v1/sleeves', { stackId: 'stack:none', embodimentType: 'ai' }, { status: 404 });
    await check('POST', '/v1/sleeves', { stackId: stack.id }, { status: 400 });
    await check('POST', '/v1/sleeves/stack:none', { kind: 'ai' }, { status: 404 });
    await check('POST', `/v1/sleeves/${enc(stack.id)}`, { kind: 'ai', tickRate: 'fast' }, { status: 400 });
    await check('GET', '/v1/sleeves', undefined, { status: 200 });
    await check('GET', `/v1/sleeves/${enc(ai.id)}`, undefined, { status: 200 });
    await check('GET', '/v1/sleeves/sleeve:none', undefined, { status: 404 });

    // memory
    const cid = (await check('POST', `/v1/sleeves/${enc(ai.id)}/perceive`, { input: 'hello' }, { status: 200 })).body.cid;
    await check('POST', `/v1/sleeves/${enc(ai.id)}/perceive`, { input: 1 }, { status: 400 });
    await check('POST', '/v1/sleeves/sleeve:none/perceive', { input: 'x' }, { status: 404 });
    await check('POST', '/v1/perceive', { stackId: stack.id, sleeveId: human.id, text: 'seen' }, { status: 200 });
    await check('POST', '/v1/perceive', { stackId: stack.id, sleeveId: foreign.id, text: 'not mine' }, { status: 403 });
    await check('POST', '/v1/perceive', { stackId: stack.id }, { status: 400 });
    await check('POST', `/v1/stacks/${enc(stack.id)}/remember`, { text: 'kept', pin: true }, { status: 200 });
    await check('POST', '/v1/stacks/stack:none/remember', { text: 'x' }, { status: 404 });
    await check('POST', `/v1/sleeves/${enc(ai.id)}/remember`, { text: 'kept too' }, { status: 200 });
    await check('POST', `/v1/sleeves/${enc(ai.id)}/remember`, { text: 'x', pin: 'yes' }, { status: 400 });
    await check('POST', `/v1/sleeves/${enc(ai.id)}/pin`, { cid }, { status: 200 });
    await check('POST', `/v1/sleeves/${enc(ai.id)}/pin`, { cid: 'cog://' + '0'.repeat(64) + '@1' }, { status: 404 });
    await check('POST', `/v1/sleeves/${enc(foreign.id)}/pin`, { cid }, { status: 403 });
    const recallA = (await check('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=5`, undefined, { status: 200 })).body;
    expect(recallA.fragments.map((f: { cid: string }) => f.cid)).toContain(cid);
    await check('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=deep`, undefined, { status: 400 });
    await check('GET', '/v1/stacks/stack:none/recall?depth=5', undefined, { status: 404 });
    await check('POST', '/v1/recall', { stackId: stack.id, depth: 5 }, { status: 200 });
    await check('POST', '/v1/recall', { stackId: stack.id, depth: 5, sleeveId: foreign.id }, { status: 403 });
    await check('POST', '/v1/recall', { stackId: 'stack:none', depth: 5 }, { status: 404 });
    await check('POST', '/v1/recall', { stackId: stack.id, depth: '5' }, { status: 400 });

    // sync, 402 once the sleeve holds no sync token
    await check('POST', `/v1/sleeves/${enc(human.id)}/sync`, undefined, { status: 200 });
    await g.p.db.prisma.$transaction((tx) =>
      burn(tx, sleeveAccount(human.id), [{ token: 'sync', milli: 499_000n }], { reason: 'test', epoch: g.p.epochs.current(), stackId: stack.id }),
    );
    const short = await check('POST', `/v1/sleeves/${enc(human.id)}/sync`, undefined, { status: 402 });
    expect(short.body).toMatchObject({ code: 'INSUFFICIENT_TOKENS', token: 'sync', required: 1, available: 0 });
    await check('POST', '/v1/sleeves/sleeve:none/sync', undefined, { status: 404 });
    await check('GET', `/v1/tokens/balances/${enc(stack.id)}`, undefined, { status: 200 });
    await check('GET', '/v1/tokens/balances/stack:none', undefined, { status: 404 });
    await check('GET', '/v1/coordination/desync', undefined, { status: 200 });

    // economy
    await check('GET', `/v1/stacks/${enc(stack.id)}/balances`, undefined, { status: 200 });
    await check('GET', '/v1/stacks/stack:none/balances', undefined, { status: 404 });
    await check('GET', `/v1/treasury/issuance/${enc(stack.id)}`, undefined, { status: 200 });
    await check('GET', '/v1/treasury/issuance/stack:none', undefined, { status: 404 });
    await check('POST', '/v1/treasury/claim', { stackId: stack.id }, { status: 200 });
    await check('POST', '/v1/treasury/claim', { stackId: 'stack:none' }, { status: 404 });
    await check('POST', '/v1/treasury/claim', {}, { status: 400 });
    await check('POST', '/v1/faucet/drip', { stackId: stack.id }, { status: 200 });
    const cool = await check('POST', '/v1/faucet/drip', { stackId: stack.id }, { status: 429 });
    expect(cool.headers.get('retry-after')).toMatch(/^\d+$/);
    await check('POST', '/v1/faucet/drip', { stackId: 'stack:none' }, { status: 404 });

    // residues (one opened the way the workers open them)
    const { residue } = await g.p.db.prisma.$transaction((tx) =>
      openResidue(tx, {
        kind: 'stale-ordering',
        trigger: 'openapi test',
        stackId: stack.id,
        sleeveId: ai.id,
        epoch: g.p.epochs.current(),
        evidence: {},
        dedupeKey: `openapi-test:${stack.id}`,
        expiryEpochs: 100,
      }),
    );
    await check('GET', '/v1/coordination/residues', undefined, { status: 200 });
    await check('GET', `/v1/coordination/residues?status=open&kind=stale-ordering&stackId=${enc(stack.id)}&limit=5`, undefined, { status: 200 });
    await check('GET', '/v1/coordination/residues?limit=0', undefined, { status: 400 });
    await check('GET', `/v1/coordination/residues/${enc(residue.id)}`, undefined, { status: 200 });
    await check('GET', '/v1/coordination/residues/residue:none', undefined, { status: 404 });
    await check('POST', `/v1/coordination/residues/${enc(residue.id)}/proof`, { claimant: 'stack:none', proof: {} }, { status: 404 });
    await check('POST', '/v1/coordination/residues/residue:none/proof', { claimant: stack.id }, { status: 404 });
    await check('POST', `/v1/coordination/residues/${enc(residue.id)}/proof`, {}, { status: 400 });
    await check('POST', `/v1/coordination/residues/${enc(residue.id)}/proof`, { claimant: stack.id, proof: {} }, { status: 200 });
    await check('POST', `/v1/coordination/residues/${enc(residue.id)}/proof`, { claimant: stack.id, proof: {} }, { status: 409 });
    const { residue: equivocation } = await g.p.db.prisma.$transaction((tx) =>
      openResidue(tx, {
        kind: 'routing-equivocation',
        trigger: 'openapi test',
        stackId: stack.id,
        epoch: g.p.epochs.current(),
        evidence: { operator: 'anonymous' },
        dedupeKey: `openapi-test:equivocation:${stack.id}`,
        expiryEpochs: 100,
      }),
    );
    await check('POST', `/v1/coordination/residues/${enc(equivocation.id)}/proof`, { claimant: stack.id, proof: {} }, { status: 422 });

    // needlecast, both shapes
    const a = (await check('POST', '/v1/needlecast', { from: ai.id, to: 'mining' }, { status: 200 })).body;
    expect(a.status).toBe('completed');
    const moved = (await check('GET', `/v1/needlecast/${enc(a.sagaId)}`, undefined, { status: 200 })).body;
    const target = moved.to as string;
    await check('POST', '/v1/needlecast', { stackId: stack.id, fromSleeveId: target, toSleeveKind: 'ai' }, { status: 200 });
    await check('POST', '/v1/needlecast', { from: 'sleeve:none', to: 'ai' }, { status: 404 });
    await check('POST', '/v1/needlecast', { toTickRate: -1 }, { status: 400 });
    await check('GET', '/v1/needlecast/needle:0000000000000000', undefined, { status: 404 });

    // decommission
    await check('DELETE', `/v1/sleeves/${enc(foreign.id)}`, undefined, { status: 200 });
    await check('DELETE', `/v1/sleeves/${enc(foreign.id)}`, undefined, { status: 409 });
    await check('DELETE', '/v1/sleeves/sleeve:none', undefined, { status: 404 });

    // chains: Medulla answering, then down
    await check('GET', '/v1/epochs/current', undefined, { status: 200 });
    await check('POST', '/v1/mining/block', undefined, { status: 200 });
    await medulla!.close();
    medulla = undefined;
    await check('POST', '/v1/mining/block', undefined, { status: 503 });
    await check('GET', '/v1/epochs/current', undefined, { status: 200 });

    // COG_AUTH=required: unsigned writes (and the recall GET) are 401s
    const signed = signedGateway.url!;
    await check('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'ai' }, { base: signed, status: 401 });
    await check('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=1`, undefined, { base: signed, status: 401 });
    await check('POST', '/v1/faucet/drip', { stackId: stack.id }, { base: signed, status: 401 });
    await check('POST', '/v1/stacks', { name: 'needs no signature' }, { base: signed, status: 201 });

    // Every documented operation was answered with a success, and with an error unless it takes
    // no input (those answer only the common 429, 500 and 503).
    const NO_INPUT = ['get /healthz', 'get /v1/openapi.json', 'get /v1/stacks', 'get /v1/sleeves', 'get /v1/coordination/desync', 'get /v1/epochs/current'];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops)) {
        const statuses = [...(seen.get(`${method.toUpperCase()} ${path}`) ?? [])];
        expect(
          statuses.some((s) => s < 300),
          `${method} ${path}: no success seen (${statuses})`,
        ).toBe(true);
        if (!NO_INPUT.includes(`${method} ${path}`))
          expect(
            statuses.some((s) => s >= 400),
            `${method} ${path}: no error seen (${statuses})`,
          ).toBe(true);
      }
    }
  }, 180_000);
});
