// The inspector at scale in a real browser (Debian's chromium driven by playwright-core): an
// in-process gateway serving /ui over a database holding 10,000 stacks and one stack with a memory
// timeline of 3,000 nodes (both inserted in bulk, one statement each). The stacks page shows its
// first page and the total within a bound, a search narrows the list, paging works; the long
// timeline keeps a bounded number of rows in the DOM and loads more as it scrolls; the main thread
// stays responsive (long tasks seen by a PerformanceObserver, click-to-DOM times); no console error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { call, secureGateway, type SecureGateway } from './helpers/secure-gateway.ts';

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
const STACKS = 10_000;
const NODES = 3000;
// Generous: this is a shared, loaded 2-core machine; the figures are logged to compare runs.
const FIRST_PAGE_MS = 10_000;
const CLICK_MS = 3000;
const LONG_TASK_MS = 2000;

let g: SecureGateway;
let ctx: BrowserContext;
let profile: string;
let longStack = '';
const problems: string[] = [];

async function newPage(): Promise<Page> {
  const page = await ctx.newPage();
  // Every task over 50 ms on the page's main thread, from the document's start.
  await page.addInitScript(() => {
    const w = window as unknown as { longTasks: number[] };
    w.longTasks = [];
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) w.longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered: true });
  });
  page.on('console', (m) => m.type() === 'error' && problems.push(`console error on ${page.url()}: ${m.text()}`));
  page.on('pageerror', (e) => problems.push(`page error on ${page.url()}: ${e.message}`));
  return page;
}
const longTasks = (page: Page) => page.evaluate(() => (window as unknown as { longTasks: number[] }).longTasks.slice());
const summary = (t: number[]) =>
  `${t.length} long task${t.length === 1 ? '' : 's'}, longest ${Math.round(Math.max(0, ...t))} ms, total ${Math.round(t.reduce((a, b) => a + b, 0))} ms`;

/** Milliseconds from a click to the DOM showing what it should (the page's own clock). */
async function clickToDom(page: Page, click: () => Promise<void>, done: () => Promise<boolean>): Promise<number> {
  await page.evaluate(() => ((window as unknown as { t0: number }).t0 = 0));
  // The click's time is taken in the page on its mousedown; the end, when `done` first holds.
  await page.evaluate(() =>
    document.addEventListener('mousedown', () => ((window as unknown as { t0: number }).t0 = performance.now()), { once: true, capture: true }),
  );
  await click();
  await expect.poll(done, { timeout: 10_000, interval: 20 }).toBe(true);
  return page.evaluate(() => performance.now() - (window as unknown as { t0: number }).t0);
}

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  g = await secureGateway();
  const s = await call(g.url, 'POST', '/v1/stacks', { name: 'long-memory', kind: 'ai' });
  expect(s.status, s.text).toBe(201);
  longStack = s.body.id;
  // One real stack plus 9,999 straight into the table (the API would mint 10,000 NFTs), as
  // test/ui.api.test.ts does; the bulk ids sort after the real one's token id (newest first).
  await g.p.db.prisma.$executeRawUnsafe(`INSERT INTO "Stack" (id, name, kind, shape, "pubKey", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "masterSecret")
    SELECT 'stack:human:' || (100000 + n) || ':' || lpad(to_hex(n), 12, '0'), 'bulk-' || n, CASE WHEN n % 2 = 1 THEN 'human' ELSE 'memory' END, 'A',
      md5('a' || n) || md5('b' || n), 1, 1, 1, 1, 1, 'x' FROM generate_series(0, ${STACKS - 2}) AS n`);
  // The long timeline: node n written in epoch n/10, each linking the one before (writeSeq follows n).
  await g.p.db.prisma.$executeRawUnsafe(
    `INSERT INTO "MemoryNode" (cid, "stackId", epoch, links, kind, size)
    SELECT 'cog://bulk' || lpad(n::text, 6, '0') || '@' || (n / 10), $1, n / 10,
      CASE WHEN n = 0 THEN ARRAY[]::text[] ELSE ARRAY['cog://bulk' || lpad((n - 1)::text, 6, '0') || '@' || ((n - 1) / 10)] END, 'perceive', 64
    FROM generate_series(0, ${NODES - 1}) AS n ORDER BY n`,
    longStack,
  );
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-ui-scale-'));
  ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 900 } });
}, 180_000);

afterAll(async () => {
  await ctx?.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  await g?.close();
});

const cid = (n: number) => `cog://bulk${String(n).padStart(6, '0')}@${Math.floor(n / 10)}`;

describe('the inspector with 10,000 stacks', () => {
  it('shows the first page and the total, narrows by search and pages, staying responsive', async () => {
    const page = await newPage();
    const rows = page.getByTestId('stacks-table').locator('tbody tr');
    const t0 = Date.now();
    await page.goto(`${g.url}/ui/#/stacks`);
    await expect.poll(() => page.getByTestId('stacks-total').textContent(), { timeout: FIRST_PAGE_MS, interval: 20 }).toBe(`${STACKS} stacks`);
    await expect.poll(() => rows.count(), { timeout: FIRST_PAGE_MS, interval: 20 }).toBe(25);
    const firstPage = Date.now() - t0;
    expect(firstPage).toBeLessThan(FIRST_PAGE_MS);
    const nav = await page.evaluate(() => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventEnd);

    // Search: every row shown matches, and the total is smaller.
    const ts = Date.now();
    await page.getByTestId('stack-search').fill('bulk-99');
    await expect.poll(() => page.getByTestId('stacks-total').textContent(), { timeout: 10_000, interval: 20 }).toBe('110 stacks'); // bulk-99, -990…-999, -9900…-9998
    const searched = Date.now() - ts; // includes the page's 250 ms debounce
    const names = await rows.locator('td:nth-child(2)').allTextContents();
    expect(names).toHaveLength(25);
    for (const n of names) expect(n).toMatch(/^bulk-99/);
    await page.getByTestId('stack-search').fill('');
    await expect.poll(() => page.getByTestId('stacks-total').textContent(), { timeout: 10_000 }).toBe(`${STACKS} stacks`);

    // Paging: the next page is older (lower token ids) and the range moves; timed click to DOM.
    await expect.poll(() => rows.count()).toBe(25);
    const tokens = async () => (await rows.locator('td:first-child').allTextContents()).map((t) => Number(t.slice(1)));
    const p1 = await tokens();
    expect(p1).toEqual([...p1].sort((a, b) => b - a));
    const paged = await clickToDom(
      page,
      () => page.getByTestId('stacks-next').click(),
      async () => (await tokens())[0] !== p1[0],
    );
    const p2 = await tokens();
    expect(p2).toHaveLength(25);
    expect(p2[0]).toBeLessThan(p1.at(-1)!);
    await page.getByText(`26–50 of ${STACKS}`).waitFor({ timeout: 5000 });
    const back = await clickToDom(
      page,
      () => page.getByRole('button', { name: '‹ newer' }).click(),
      async () => (await tokens())[0] === p1[0],
    );
    expect(paged).toBeLessThan(CLICK_MS);
    expect(back).toBeLessThan(CLICK_MS);

    const lt = await longTasks(page);
    console.log(
      `stacks page over ${STACKS} stacks: first page and total on screen ${firstPage} ms after navigation (load event at ${Math.round(nav)} ms); search to ${'110'} rows ${searched} ms (250 ms debounce included); click to next page ${Math.round(paged)} ms, back ${Math.round(back)} ms; ${summary(lt)}`,
    );
    expect(Math.max(0, ...lt)).toBeLessThan(LONG_TASK_MS);
    // The observer does see a blocked main thread: 150 ms of busy work in one of the page's own
    // tasks shows up as a long task (work run by CDP's evaluate itself is not a page task).
    await page.evaluate(() =>
      setTimeout(() => {
        const t = performance.now();
        while (performance.now() - t < 150);
      }, 0),
    );
    await expect.poll(async () => Math.max(0, ...(await longTasks(page)).slice(lt.length)), { timeout: 5000 }).toBeGreaterThanOrEqual(150);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);

  it(`keeps a ${NODES}-node memory timeline virtualised: bounded rows in the DOM, more loaded on scroll`, async () => {
    const page = await newPage();
    const timeline = page.getByTestId('memory-timeline');
    const t0 = Date.now();
    await page.goto(`${g.url}/ui/#/stacks/${encodeURIComponent(longStack)}`);
    await page.locator(`[data-cid="${cid(NODES - 1)}"]`).waitFor({ timeout: FIRST_PAGE_MS }); // the head, newest first
    const shown = Date.now() - t0;
    await page.getByTestId('memory').getByText(`${NODES} nodes from the head back`).waitFor({ timeout: 5000 });
    const domRows = () => timeline.locator('.vrow').count();
    const atTop = await domRows();
    expect(atTop).toBeGreaterThan(5);
    expect(atTop).toBeLessThanOrEqual(40);
    // Scroll to the middle and to the very end: the pages there load on demand, the DOM stays bounded.
    const counts: number[] = [];
    const scrolls: number[] = [];
    for (const i of [1500, NODES - 1]) {
      const t = Date.now();
      await timeline.evaluate((el, top) => (el.scrollTop = top), i * 30);
      await page.locator(`[data-cid="${cid(NODES - 1 - i)}"]`).waitFor({ timeout: 10_000 });
      scrolls.push(Date.now() - t);
      counts.push(await domRows());
    }
    for (const c of counts) expect(c).toBeLessThanOrEqual(40);
    expect(await page.locator(`[data-cid="${cid(NODES - 1)}"]`).count()).toBe(0); // the head's row left the DOM
    expect(await timeline.locator('.node').count()).toBeLessThanOrEqual(40);
    // The oldest node, the first written, has no parent.
    expect(await page.locator(`[data-cid="${cid(0)}"]`).isVisible()).toBe(true);
    const lt = await longTasks(page);
    console.log(
      `memory timeline of ${NODES} nodes: head on screen ${shown} ms after navigation; rows in the DOM ${atTop} at the top, ${counts.join(' / ')} at node 1500 / the end; scroll to a new page shown in ${scrolls.join(' / ')} ms; ${summary(lt)}`,
    );
    expect(Math.max(0, ...lt)).toBeLessThan(LONG_TASK_MS);
    for (const s of scrolls) expect(s).toBeLessThan(CLICK_MS);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
