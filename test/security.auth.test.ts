// COG_AUTH=required on a real gateway: signed stack-scoped writes pass; a wrong, stale, replayed,
// foreign or missing signature is a 401 that changes nothing; a sleeve acts only for its own stack,
// over REST and GraphQL; the one state-changing GET (recall) is signed too; reads stay open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { signRequest, signingMessage } from '../lib/sign.ts';
import { publicKeyFromSeed, verify } from '../lib/crypto.ts';
import { call, enc, isProblem, secureGateway, signedCall, snapshot, type Identity, type Res, type SecureGateway } from './helpers/secure-gateway.ts';

let g: SecureGateway;
let A: Identity & { sleeveId: string };
let B: Identity & { sleeveId: string };

async function createStack(name: string): Promise<Identity> {
  const r = await call(g.url, 'POST', '/v1/stacks', { name });
  expect(r.status).toBe(201);
  return { stackId: r.body.id, identityPriv: r.body.identityPriv };
}

/** Runs a request that must be refused with 401, asserting the database is unchanged. */
async function refused(run: () => Promise<Res>): Promise<Res> {
  const before = await snapshot(g.p);
  const r = await run();
  expect(r.status, r.text).toBe(401);
  expect(isProblem(r), r.text).toBe(true);
  expect(r.body.code).toBe('UNAUTHORIZED');
  expect(r.headers.get('www-authenticate')).toMatch(/^Cog-Ed25519 realm="cog", headers="x-cog-stack x-cog-timestamp x-cog-signature"$/);
  expect(await snapshot(g.p)).toBe(before);
  return r;
}

beforeAll(async () => {
  g = await secureGateway({ COG_AUTH: 'required', COG_AUTH_SKEW_MS: '5000' });
  const a = await createStack('alice');
  const b = await createStack('bob');
  const sa = await signedCall(g.url, a, 'POST', '/v1/sleeves', { stackId: a.stackId, embodimentType: 'ai' });
  expect(sa.status, sa.text).toBe(201);
  const sb = await signedCall(g.url, b, 'POST', `/v1/sleeves/${enc(b.stackId)}`, { kind: 'human' });
  expect(sb.status, sb.text).toBe(201);
  A = { ...a, sleeveId: sa.body.id };
  B = { ...b, sleeveId: sb.body.id };
});
afterAll(async () => g?.close());

describe('signing scheme (lib/sign.ts)', () => {
  it('signs METHOD, path with query, body sha256 and timestamp', () => {
    expect(signingMessage('post', '/v1/x?a=1', '', '1700000000000')).toBe(
      'POST\n/v1/x?a=1\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n1700000000000',
    );
    const h = signRequest({ method: 'POST', path: '/p', body: { a: 1 }, stackId: 's', identityPriv: '11'.repeat(32), now: 5 });
    expect(h['x-cog-timestamp']).toBe('5');
    expect(h['x-cog-signature']).toMatch(/^[0-9a-f]{128}$/);
    const msg = new TextEncoder().encode(signingMessage('POST', '/p', '{"a":1}', '5'));
    expect(verify(h['x-cog-signature'], msg, publicKeyFromSeed('11'.repeat(32)))).toBe(true);
  });
});

describe('signed REST writes', () => {
  it('a correctly signed stack-scoped write passes and takes effect', async () => {
    const before = await g.p.db.prisma.memoryNode.count();
    const r = await signedCall(g.url, A, 'POST', `/v1/sleeves/${enc(A.sleeveId)}/perceive`, { input: 'signed hello' });
    expect(r.status, r.text).toBe(200);
    expect(r.body.cid).toMatch(/^cog:\/\//);
    expect(await g.p.db.prisma.memoryNode.count()).toBe(before + 1);
    const shapeB = await signedCall(g.url, B, 'POST', '/v1/perceive', { stackId: B.stackId, sleeveId: B.sleeveId, text: 'b' });
    expect(shapeB.status, shapeB.text).toBe(200);
  });

  it('a missing header (any of the three) is a 401 that changes nothing', async () => {
    const path = `/v1/sleeves/${enc(A.sleeveId)}/perceive`;
    const body = JSON.stringify({ input: 'x' });
    const h = signRequest({ method: 'POST', path, body, ...A });
    await refused(() => call(g.url, 'POST', path, body));
    for (const drop of Object.keys(h)) {
      const partial = Object.fromEntries(Object.entries(h).filter(([k]) => k !== drop));
      await refused(() => call(g.url, 'POST', path, body, partial));
    }
  });

  it('a wrong signature is a 401: other key, tampered body, path, method or timestamp, junk', async () => {
    const path = `/v1/sleeves/${enc(A.sleeveId)}/perceive`;
    const body = JSON.stringify({ input: 'x' });
    // signed with B's key while claiming to be A
    const wrongKey = signRequest({ method: 'POST', path, body, stackId: A.stackId, identityPriv: B.identityPriv });
    await refused(() => call(g.url, 'POST', path, body, wrongKey));
    // valid signature over a different body / path / method
    const h = signRequest({ method: 'POST', path, body, ...A });
    await refused(() => call(g.url, 'POST', path, JSON.stringify({ input: 'y' }), h));
    await refused(() => call(g.url, 'POST', `${path}?x=1`, body, h));
    const del = signRequest({ method: 'POST', path: `/v1/sleeves/${enc(A.sleeveId)}`, ...A });
    await refused(() => call(g.url, 'DELETE', `/v1/sleeves/${enc(A.sleeveId)}`, undefined, del));
    await refused(() => call(g.url, 'POST', path, body, { ...h, 'x-cog-timestamp': String(Number(h['x-cog-timestamp']) + 1) }));
    // malformed signatures, an unknown stack
    for (const sig of ['', '00', 'z'.repeat(128), h['x-cog-signature'].toUpperCase(), h['x-cog-signature'] + '00']) {
      await refused(() => call(g.url, 'POST', path, body, { ...h, 'x-cog-signature': sig }));
    }
    await refused(() => call(g.url, 'POST', path, body, { ...h, 'x-cog-stack': 'stack:human:999:000000000000' }));
  });

  it('a stale or future timestamp (outside the skew) is a 401', async () => {
    const path = `/v1/sleeves/${enc(A.sleeveId)}/sync`;
    await refused(() => signedCall(g.url, A, 'POST', path, undefined, { now: Date.now() - 6000 }));
    // Far enough ahead that the time the request takes to arrive does not bring it inside the skew.
    await refused(() => signedCall(g.url, A, 'POST', path, undefined, { now: Date.now() + 20_000 }));
    const h = signRequest({ method: 'POST', path, ...A });
    await refused(() => call(g.url, 'POST', path, undefined, { ...h, 'x-cog-timestamp': 'soon' }));
    // inside the skew it passes
    expect((await signedCall(g.url, A, 'POST', path, undefined, { now: Date.now() - 2000 })).status).toBe(200);
  });

  it('a replayed signature is a 401 that changes nothing', async () => {
    const path = `/v1/sleeves/${enc(A.sleeveId)}/perceive`;
    const body = JSON.stringify({ input: 'once' });
    const h = signRequest({ method: 'POST', path, body, ...A });
    expect((await call(g.url, 'POST', path, body, h)).status).toBe(200);
    const r = await refused(() => call(g.url, 'POST', path, body, h));
    expect(r.body.detail).toMatch(/Replay/i);
    // the same signed message with re-encoded headers is still a replay (or malformed): never accepted
    await refused(() => call(g.url, 'POST', path, body, { ...h, 'x-cog-timestamp': `0${h['x-cog-timestamp']}` }));
  });

  it("a signature by another stack's key cannot act for that stack or with its sleeves", async () => {
    // B signs correctly (as B) but names A's sleeve / A's stack
    await refused(() => signedCall(g.url, B, 'POST', `/v1/sleeves/${enc(A.sleeveId)}/perceive`, { input: 'intrude' }));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/perceive', { stackId: B.stackId, sleeveId: A.sleeveId, text: 'mix' }));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/perceive', { stackId: A.stackId, sleeveId: B.sleeveId, text: 'mix' }));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/sleeves', { stackId: A.stackId, embodimentType: 'ai' }));
    await refused(() => signedCall(g.url, B, 'POST', `/v1/sleeves/${enc(A.stackId)}`, { kind: 'ai' }));
    await refused(() => signedCall(g.url, B, 'DELETE', `/v1/sleeves/${enc(A.sleeveId)}`));
    await refused(() => signedCall(g.url, B, 'POST', `/v1/sleeves/${enc(A.sleeveId)}/sync`));
    await refused(() => signedCall(g.url, B, 'POST', `/v1/stacks/${enc(A.stackId)}/remember`, { text: 't', pin: true }));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/recall', { stackId: A.stackId, depth: 2 }));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/recall', { stackId: B.stackId, depth: 2, sleeveId: A.sleeveId }));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/needlecast', { from: A.sleeveId, to: B.sleeveId }));
    await refused(() => signedCall(g.url, B, 'GET', `/v1/stacks/${enc(A.stackId)}/recall?depth=2`));
    await refused(() => signedCall(g.url, B, 'POST', '/v1/coordination/residues/residue:none/proof', { claimant: A.stackId }));
  });

  it('the recall GET spends tokens, so it is signed; plain reads are not', async () => {
    const path = `/v1/stacks/${enc(A.stackId)}/recall?depth=2`;
    await refused(() => call(g.url, 'GET', path));
    const ok = await signedCall(g.url, A, 'GET', path);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.fragments.length).toBeGreaterThan(0);
    expect((await call(g.url, 'GET', `/v1/stacks/${enc(A.stackId)}`)).status).toBe(200);
    expect((await call(g.url, 'GET', '/v1/sleeves')).status).toBe(200);
    expect((await call(g.url, 'GET', `/v1/tokens/balances/${enc(A.stackId)}`)).status).toBe(200);
  });

  it('an unsigned invalid body is refused as unsigned (401) before validation', async () => {
    await refused(() => call(g.url, 'POST', '/v1/sleeves', { stackId: 5 }));
    // malformed JSON fails at parsing, before any hook sees a body: a 400 that changes nothing
    const before = await snapshot(g.p);
    const bad = await call(g.url, 'POST', '/v1/sleeves', '{not json');
    expect(bad.status).toBe(400);
    expect(isProblem(bad)).toBe(true);
    expect(await snapshot(g.p)).toBe(before);
  });
});

describe('signed GraphQL mutations', () => {
  const perceive = 'mutation P($s: ID!, $t: String!) { perceive(sleeveId: $s, text: $t) { cid } }';

  it('createStack needs no signature; other mutations do', async () => {
    const created = await call(g.url, 'POST', '/graphql', { query: 'mutation { createStack(name: "gql") { stack { id } } }' });
    expect(created.status, created.text).toBe(200);
    expect(created.body.data.createStack.stack.id).toMatch(/^stack:/);
    await refused(() => call(g.url, 'POST', '/graphql', { query: perceive, variables: { s: A.sleeveId, t: 'unsigned' } }));
    // queries are open
    const q = await call(g.url, 'POST', '/graphql', { query: '{ currentEpoch { epoch } }' });
    expect(q.status).toBe(200);
  });

  it("a signed mutation for the own sleeve passes; for another stack's sleeve it is a 401", async () => {
    const ok = await signedCall(g.url, A, 'POST', '/graphql', { query: perceive, variables: { s: A.sleeveId, t: 'gql signed' } });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.perceive.cid).toMatch(/^cog:\/\//);
    await refused(() => signedCall(g.url, B, 'POST', '/graphql', { query: perceive, variables: { s: A.sleeveId, t: 'intrude' } }));
    // the id hidden in a literal argument, an alias, a fragment, or next to createStack
    await refused(() => signedCall(g.url, B, 'POST', '/graphql', { query: `mutation { x: syncSleeve(id: "${A.sleeveId}") { ok } }` }));
    await refused(() =>
      signedCall(g.url, B, 'POST', '/graphql', {
        query: `mutation { ...F } fragment F on Mutation { decommissionSleeve(id: "${A.sleeveId}") { id } }`,
      }),
    );
    await refused(() =>
      signedCall(g.url, B, 'POST', '/graphql', {
        query: `mutation { createStack(name: "n") { stack { id } } spawnSleeve(stackId: "${A.stackId}", kind: "ai") { id } }`,
      }),
    );
    await refused(() =>
      call(g.url, 'POST', '/graphql', { query: `mutation { createStack(name: "n") { stack { id } } syncSleeve(id: "${A.sleeveId}") { ok } }` }),
    );
  });

  it('mutations over the graphql-ws socket are refused with COG_AUTH=required', async () => {
    const before = await snapshot(g.p);
    const ws = new WebSocket(`${g.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    const messages: any[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.on('error', reject);
      ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init' })));
      ws.on('message', (m) => {
        const msg = JSON.parse(String(m));
        messages.push(msg);
        if (msg.type === 'connection_ack') {
          ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: perceive, variables: { s: A.sleeveId, t: 'over ws' } } }));
        }
        if (msg.type === 'complete' || msg.type === 'error') resolve();
      });
    });
    ws.close();
    const next = messages.find((m) => m.type === 'next' || m.type === 'error');
    expect(JSON.stringify(next)).toContain('UNAUTHORIZED');
    expect(await snapshot(g.p)).toBe(before);
  });
});
