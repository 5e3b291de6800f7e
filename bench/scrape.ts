// What a Prometheus scrape costs under load: the mixed load of bench/load.ts (perceive, recall,
// reads; 8 clients) against an embedded platform, in alternating windows without and with a
// scraper that reads the process's /metrics and the gateway's /readyz once a second (15 times more
// often than Prometheus' default 15 s). Prints p50/p99 of the load in each mode and the scrape's own
// latency and size. The baseline is the windows without scraping, measured in the same run.
//   npx tsx bench/scrape.ts [secondsPerWindow=20] [pairs=2]
import { startCluster } from '../test/helpers/cluster.ts';
import { runLoad } from './load.ts';

const windowS = Number(process.argv[2] ?? 20);
const pairs = Number(process.argv[3] ?? 2);
const c = await startCluster({ mode: 'embedded', shift: 34000, env: { COG_RATE_LIMIT_PER_MIN: '0' } });
try {
  await c.waitHealthy(120_000);
  // Embedded: one registry for the process, so one /metrics (the gateway's) is the whole scrape.
  const targets = [c.gateway];
  const scrapeMs: number[] = [];
  let bytes = 0;
  const scraper = (stop: { done: boolean }) =>
    (async () => {
      while (!stop.done) {
        const t0 = performance.now();
        await Promise.all(
          targets.map(async (u) => {
            const s = performance.now();
            const text = await (await fetch(`${u}/metrics`)).text();
            scrapeMs.push(performance.now() - s);
            bytes = text.length;
            await (await fetch(`${u}/readyz`)).body?.cancel();
          }),
        );
        await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - t0))));
      }
    })();
  await runLoad({ gateways: [c.gateway], durationMs: 5000, concurrency: 8 }); // warm-up
  const rows: Array<{ mode: string; rps: number; p50: number; p99: number; errors: number }> = [];
  for (let i = 0; i < pairs; i++) {
    for (const scraping of [false, true]) {
      const stop = { done: false };
      const s = scraping ? scraper(stop) : Promise.resolve();
      const r = await runLoad({ gateways: [c.gateway], durationMs: windowS * 1000, concurrency: 8 });
      stop.done = true;
      await s;
      rows.push({ mode: scraping ? 'scraping' : 'baseline', rps: r.rps, p50: r.p50, p99: r.p99, errors: r.errors });
      console.log(
        `${scraping ? 'with scrapes' : 'no scrapes  '}: ${r.requests} requests, ${r.rps.toFixed(1)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.errors} errors`,
      );
    }
  }
  const mean = (m: string, k: 'p50' | 'p99' | 'rps') => rows.filter((r) => r.mode === m).reduce((n, r) => n + r[k], 0) / pairs;
  scrapeMs.sort((a, b) => a - b);
  const q = (f: number) => scrapeMs[Math.min(scrapeMs.length - 1, Math.floor(f * scrapeMs.length))]!.toFixed(1);
  console.log(
    `\nbaseline: p50 ${mean('baseline', 'p50').toFixed(0)} ms, p99 ${mean('baseline', 'p99').toFixed(0)} ms, ${mean('baseline', 'rps').toFixed(1)} req/s`,
  );
  console.log(
    `scraping: p50 ${mean('scraping', 'p50').toFixed(0)} ms, p99 ${mean('scraping', 'p99').toFixed(0)} ms, ${mean('scraping', 'rps').toFixed(1)} req/s (ratio p99 ${(mean('scraping', 'p99') / mean('baseline', 'p99')).toFixed(2)})`,
  );
  console.log(`one /metrics scrape: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, ${(bytes / 1024).toFixed(0)} KiB, ${scrapeMs.length} scrapes`);
} finally {
  await c.stop();
}
