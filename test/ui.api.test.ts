// What the inspector needs from the gateway, without a browser: /ui serving its build (CSP, cache
// headers, nothing outside ui/dist, a 503 problem without a build), the GraphQL fields added for it
// (a paged, searchable stacks list that stays fast at 10,000 stacks, counts, drift lines, memory
// pages with their gating, balances over epochs, residue proofs), and the page's own signing module
// (ui/src/sign.ts) accepted by a gateway with COG_AUTH=required.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, secureGateway, signedCall, type SecureGateway } from './helpers/secure-gateway.ts';
import { createHttp } from '../lib/http.ts';
import { createLogger } from '../lib/log.ts';
import { mountUi } from '../router/ui.ts';
import { addKey, forgetKey, publicKeyOf, signHeaders } from '../ui/src/sign.ts';
import { uiBuildCurrent } from '../ui/build.mjs';
import { chromium } from 'playwright-core';

let g: SecureGateway;
let alice: { stackId: string; identityPriv: string; sleeveId: string };

const gql = async (query: string, variables: Record<string, unknown> = {}, headers: Record<string, string> = {}) => {
  const body = JSON.stringify({ query, variables });
  const r = await fetch(`${g.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: r.status, body: await r.json() };
};

beforeAll(async () => {
  g = await secureGateway({ COG_AUTH: 'required' });
  const s = await call(g.url, 'POST', '/v1/stacks', { name: 'alice', kind: 'ai' });
  expect(s.status).toBe(201);
  const v = await signedCall(g.url, { stackId: s.body.id, identityPriv: s.body.identityPriv }, 'POST', '/v1/sleeves', {
    stackId: s.body.id,
    embodimentType: 'ai',
  });
  expect(v.status, v.text).toBe(201);
  alice = { stackId: s.body.id, identityPriv: s.body.identityPriv, sleeveId: v.body.id };
}, 180_000); // a migrated PGlite and a gateway: slow on a loaded machine
afterAll(async () => g?.close());

describe('/ui', () => {
  it('serves the current build: the page with a same-origin CSP, hashed assets cached for good', async () => {
    expect(uiBuildCurrent()).toBe(true); // bin/cog.mjs generate (the suite's global setup) built it
    const page = await fetch(`${g.url}/ui`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('cache-control')).toBe('no-cache');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/ui\/assets\/[^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const a of assets) {
      const r = await fetch(g.url + a);
      expect(r.status, a).toBe(200);
      expect(r.headers.get('cache-control')).toContain('immutable');
      await r.arrayBuffer();
    }
    expect((await fetch(`${g.url}/ui/`)).status).toBe(200);
  });

  it('serves nothing but ui/dist/assets, and answers a 503 problem when there is no build', async () => {
    for (const p of ['/ui/assets/..%2f..%2fpackage.json', '/ui/assets/.build-hash', '/ui/assets/nope.js', '/ui/assets/a%00.js', '/ui/index.html']) {
      const r = await fetch(g.url + p);
      expect(r.status, p).toBe(404);
      await r.arrayBuffer();
    }
    const app = createHttp({ name: 'ui-test', log: createLogger({ level: 'silent', name: 't' }) });
    mountUi(app, fs.mkdtempSync(path.join(os.tmpdir(), 'no-ui-')));
    const r = await app.inject({ method: 'GET', url: '/ui' });
    expect(r.statusCode).toBe(503);
    expect(r.headers['content-type']).toMatch(/problem\+json/);
    expect(JSON.parse(r.body).code).toBe('UI_NOT_BUILT');
    await app.close();
  });
});

describe('GraphQL for the inspector', () => {
  it('pages and searches 10,000 stacks, newest first, in well under a second a page', async () => {
    // 10,000 stacks straight into the table (one statement: the API would mint 10,000 NFTs).
    await g.p.db.prisma.$executeRawUnsafe(`INSERT INTO "Stack" (id, name, kind, shape, "pubKey", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "masterSecret")
      SELECT 'stack:human:' || (100000 + n) || ':' || lpad(to_hex(n), 12, '0'), 'bulk-' || n, CASE WHEN n % 2 = 1 THEN 'human' ELSE 'memory' END, 'A',
        md5('a' || n) || md5('b' || n), 1, 1, 1, 1, 1, 'x' FROM generate_series(0, 9999) AS n`);
    const Q =
      'query($s: String, $f: Int!, $o: Int!) { stackPage(search: $s, first: $f, offset: $o) { total stacks { id tokenId name kind sleeves { id alive } } } }';
    const t0 = performance.now();
    const first = await gql(Q, { s: null, f: 25, o: 0 });
    const mid = await gql(Q, { s: null, f: 25, o: 5000 });
    const found = await gql(Q, { s: 'bulk-9999', f: 25, o: 0 });
    const ms = (performance.now() - t0) / 3;
    expect(first.body.data.stackPage.total).toBe(10_001);
    expect(first.body.data.stackPage.stacks).toHaveLength(25);
    const ids = first.body.data.stackPage.stacks.map((s: { tokenId: number }) => s.tokenId);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(mid.body.data.stackPage.stacks[0].tokenId).toBeLessThan(ids.at(-1));
    expect(found.body.data.stackPage).toMatchObject({ total: 1, stacks: [{ name: 'bulk-9999' }] });
    const byKind = await gql(Q, { s: 'AI', f: 5, o: 0 }); // alice's kind; names and ids match case-insensitively
    expect(byKind.body.data.stackPage.stacks.map((s: { id: string }) => s.id)).toContain(alice.stackId);
    const byToken = await gql(Q, { s: String(first.body.data.stackPage.stacks[3].tokenId), f: 5, o: 0 });
    expect(byToken.body.data.stackPage.stacks.map((s: { tokenId: number }) => s.tokenId)).toContain(first.body.data.stackPage.stacks[3].tokenId);
    console.log(`stackPage over 10,001 stacks: ${ms.toFixed(0)} ms a page (mean of 3)`);
    expect(ms).toBeLessThan(1000);
    for (const bad of [
      { f: 101, o: 0 },
      { f: 10, o: -1 },
      { f: 10, o: 0, s: 'x'.repeat(201) },
    ]) {
      const r = await gql(Q, { s: null, ...bad });
      expect(r.body.errors[0].extensions.code, JSON.stringify(bad)).toBe('BAD_REQUEST');
    }
  }, 60_000);

  it('counts alive sleeves and residues by status, and gives the drift lines', async () => {
    const r = await gql('{ aliveSleeveCount residueCount open: residueCount(status: "open") driftLimits { flag desync } }');
    expect(r.body.data).toMatchObject({ aliveSleeveCount: 1, driftLimits: { flag: 15, desync: 30 } });
    expect(r.body.data.residueCount).toBeGreaterThanOrEqual(r.body.data.open);
    expect((await gql('{ residueCount(status: "lost") }')).body.errors[0].extensions.code).toBe('BAD_REQUEST');
    expect((await gql('{ coherenceTuples(last: 0) { epoch } }')).body.errors[0].extensions.code).toBe('BAD_REQUEST');
    expect((await gql('{ coherenceTuples(last: 5) { epoch gaps } }')).body.data.coherenceTuples).toEqual([]);
  });

  it('signs in the page: the browser module writes for the key it holds, and nothing without it', async () => {
    expect(publicKeyOf(alice.identityPriv)).toBe((await gql('query($id: ID!) { stack(id: $id) { pubKey } }', { id: alice.stackId })).body.data.stack.pubKey);
    const perceive = 'mutation($s: ID!, $t: String!) { perceive(sleeveId: $s, text: $t) { cid epoch } }';
    const body = (t: string) => JSON.stringify({ query: perceive, variables: { s: alice.sleeveId, t } });
    const send = (b: string, headers: Record<string, string>) =>
      fetch(`${g.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: b });
    expect((await send(body('unsigned'), {})).status).toBe(401);
    addKey(alice.stackId, alice.identityPriv);
    for (const t of ['one', 'two', 'three']) {
      const b = body(t);
      const r = await send(b, signHeaders(alice.stackId, 'POST', '/graphql', b));
      expect(r.status).toBe(200);
      expect((await r.json()).data.perceive.cid).toMatch(/^cog:\/\//);
    }
    // A signature covers its body: the same headers over another body are refused.
    const h = signHeaders(alice.stackId, 'POST', '/graphql', body('signed'));
    expect((await send(body('tampered'), h)).status).toBe(401);
    forgetKey(alice.stackId);
    expect(() => signHeaders(alice.stackId, 'POST', '/graphql', body('x'))).toThrow(/no key/);
  });

  it('pages a stack memory from the head back, with when each node fades, and the balances over epochs', async () => {
    g.p.setEpoch(g.p.epochs.current() + 1);
    const r = await gql(
      `query($id: ID!) { stack(id: $id) {
      memoryCount page1: memory(first: 2) { cid epoch pinned readableUntilEpoch branchId sleeveId }
      page2: memory(first: 2, offset: 2) { cid }
      balanceHistory(last: 10) { epoch raw { compute memory } }
    } }`,
      { id: alice.stackId },
    );
    const s = r.body.data.stack;
    expect(s.memoryCount).toBe(3);
    expect(s.page1).toHaveLength(2);
    expect(s.page2).toHaveLength(1);
    expect(new Set([...s.page1, ...s.page2].map((n: { cid: string }) => n.cid)).size).toBe(3);
    for (const n of s.page1) expect(n).toMatchObject({ pinned: false, readableUntilEpoch: n.epoch + 2, branchId: null, sleeveId: alice.sleeveId });
    // Spawned with 250 compute, 1.5 spent by the three perceives.
    expect(s.balanceHistory.at(-1).raw.compute).toBe(248.5);
    const epochs = s.balanceHistory.map((p: { epoch: number }) => p.epoch);
    expect(epochs).toEqual([...new Set(epochs)].sort((a, b) => (a as number) - (b as number)));
    expect((await gql('query($id: ID!) { stack(id: $id) { memory(offset: -1) { cid } } }', { id: alice.stackId })).body.errors[0].extensions.code).toBe(
      'BAD_REQUEST',
    );
    expect((await gql('query($id: ID!) { stack(id: $id) { balanceHistory(last: 0) { epoch } } }', { id: alice.stackId })).body.errors[0].extensions.code).toBe(
      'BAD_REQUEST',
    );
  });

  it("signs a write in the browser with a pasted key (COG_AUTH=required), and refuses a key that is not the stack's", async () => {
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-ui-sign-'));
    const ctx = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const sentKey: string[] = [];
    try {
      const page = ctx.pages()[0] ?? (await ctx.newPage());
      // The key must never leave the page: watch every request it makes.
      page.on('request', (r) => {
        if ((r.postData() ?? '').includes(alice.identityPriv) || r.url().includes(alice.identityPriv)) sentKey.push(r.url());
      });
      await page.goto(`${g.url}/ui/#/keys`);
      await page.getByTestId('key-stack').fill(alice.stackId);
      await page.getByTestId('key-seed').fill('11'.repeat(32));
      await page.getByTestId('key-add').click();
      await page.getByRole('alert').filter({ hasText: 'not this stack' }).waitFor({ timeout: 5000 });
      await page.getByTestId('key-seed').fill(alice.identityPriv);
      await page.getByTestId('key-add').click();
      await page.getByTestId('keys').getByText(alice.stackId).waitFor({ timeout: 5000 });
      // In-page navigation keeps the key (memory only); the stack page now signs alice's writes.
      await page.getByTestId('keys').getByText(alice.stackId).click();
      await page.getByTestId('memory-timeline').locator('.node').first().waitFor({ timeout: 10_000 });
      const before = await gql('query($id: ID!) { stack(id: $id) { memoryCount } }', { id: alice.stackId });
      await page.getByLabel('perceive text').fill('signed in the browser');
      await page.getByRole('button', { name: 'perceive', exact: true }).click();
      await page.getByText(/^wrote cog:/).waitFor({ timeout: 10_000 });
      const after = await gql('query($id: ID!) { stack(id: $id) { memoryCount } }', { id: alice.stackId });
      expect(after.body.data.stack.memoryCount).toBe(before.body.data.stack.memoryCount + 1);
      // A reload forgets the key: the same write is refused.
      await page.reload();
      await page.getByLabel('perceive text').fill('after reload');
      await page.getByRole('button', { name: 'perceive', exact: true }).click();
      await page
        .getByRole('alert')
        .filter({ hasText: /signed request required/i })
        .waitFor({ timeout: 10_000 });
      expect(sentKey).toEqual([]);
    } finally {
      await ctx.close();
      fs.rmSync(profile, { recursive: true, force: true });
    }
  }, 60_000);
});
