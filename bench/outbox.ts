// The Cortex outbox, two ways.
//
// Backlog (the default): the whole platform started as `npm start` starts it (`cog start` with
// DATABASE_URL on this machine's PostgreSQL, on shifted ports, 1 s epochs, 4 s Cortex blocks),
// driven over HTTP from this process by 32 perceiving clients over 32 stacks; the chain outbox is
// sampled from the database every 500 ms (rows per status, age of the oldest pending and of the
// oldest open row) during the load and after it stops, until it is empty.
//   npx tsx bench/outbox.ts [--seconds=60] [--clients=32] [--epoch-ms=1000] [--drain-s=60] [--cpu-prof=DIR]
// --cpu-prof writes a V8 CPU profile of the platform process (node --cpu-prof) into DIR.
//
// Throughput (--throughput [count] [blockTimeSeconds]): transactions per second through the outbox
// (intent rows -> signed, stored, broadcast, confirmed by receipt) against raw ethers sends of the
// same calls, to the same anvil in the same run. Each side gets its own suite, so both mint the
// same fresh token ids.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { call, startCluster } from '../test/helpers/cluster.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { testPlatform } from '../test/helpers/platform.ts';
import { startTestChain } from '../test/helpers/test-chain.ts';
import { startSubmitter } from '../subgraphs/chains/cortex/submitter.ts';
import { enqueueChainTx } from '../subgraphs/chains/outbox.ts';

export interface OutboxBenchResult {
  count: number;
  blockTime: number;
  rawTps: number;
  outboxTps: number;
  /** outboxTps / rawTps */
  ratio: number;
  outboxBlocks: number;
  rawBlocks: number;
}

const CPV = [1000, 1000, 1000, 1000, 1000];
const stackId = (i: number) => `stack:human:${i}:${i.toString(16).padStart(12, '0')}`;

export async function runOutboxBench(opts: { count?: number; blockTime?: number } = {}): Promise<OutboxBenchResult> {
  const count = opts.count ?? 200;
  const blockTime = opts.blockTime ?? 1;
  const chain = await startTestChain({ blockTime });
  const p = await testPlatform();
  try {
    // Raw: one wallet, sequential nonces, all sent before waiting, then every receipt.
    const raw = await chain.freshSuite();
    const identity = raw.contract('StackIdentity');
    const fee = await chain.provider.getFeeData();
    const gasLimit = (await identity.mint.estimateGas(chain.operator.address, 1, CPV, stackId(1), '')) * 2n;
    let nonce = await chain.provider.getTransactionCount(chain.operator.address, 'pending');
    let t = performance.now();
    const sent = [];
    for (let i = 1; i <= count; i++) {
      sent.push(
        await identity.mint(chain.operator.address, i, CPV, stackId(i), '', {
          nonce: nonce++,
          gasLimit,
          maxFeePerGas: fee.maxFeePerGas,
          maxPriorityFeePerGas: fee.maxPriorityFeePerGas,
        }),
      );
    }
    const rawReceipts = await Promise.all(sent.map((s) => s.wait()));
    const rawSec = (performance.now() - t) / 1000;
    if (rawReceipts.some((r) => r?.status !== 1)) throw new Error('a raw send reverted');

    // Outbox: the same intents as rows (one DB transaction), drained by the submitter.
    const ob = await chain.freshSuite();
    await p.db.prisma.$transaction(async (tx) => {
      for (let i = 1; i <= count; i++)
        await enqueueChainTx(tx, { kind: 'mintIdentity', ref: stackId(i), payload: { stackId: stackId(i), tokenId: i, owner: null, cpv: [1, 1, 1, 1, 1] } });
    });
    t = performance.now();
    const submitter = startSubmitter(p.db, ob, p.log, { pollMs: 20 });
    await submitter.idle(600_000);
    const outboxSec = (performance.now() - t) / 1000;
    await submitter.close();
    const rows = await p.db.prisma.chainOutbox.findMany({ select: { status: true, blockNumber: true } });
    const bad = await p.db.prisma.chainOutbox.findFirst({ where: { status: { not: 'confirmed' } } });
    if (bad) throw new Error(`outbox row ${bad.id} ${bad.status}: ${bad.lastError}`);
    return {
      count,
      blockTime,
      rawTps: count / rawSec,
      outboxTps: count / outboxSec,
      ratio: count / outboxSec / (count / rawSec),
      rawBlocks: new Set(rawReceipts.map((r) => r!.blockNumber)).size,
      outboxBlocks: new Set(rows.map((r) => r.blockNumber)).size,
    };
  } finally {
    await p.cleanup();
    await chain.close();
  }
}

export interface BacklogSample {
  /** Seconds since the load started. */
  t: number;
  pending: number;
  submitted: number;
  /** Only on the samples printed (a count of the whole outbox). */
  confirmed?: number;
  failed: number;
  /** Age (ms) of the oldest pending row, and of the oldest pending or submitted one (0: none). */
  oldestPendingMs: number;
  oldestOpenMs: number;
  /** Ledger rows (mint, burn) not confirmed yet (pending or riding on a submitted settlement), and the oldest one's age. */
  ledgerOpen: number;
  oldestLedgerOpenMs: number;
  /** The kind of the oldest pending row; pending rows written before the load ended (all of them during it). */
  oldestPendingKind?: string;
  pendingFromLoad: number;
  /** The platform's epoch (Medulla's), and the pending rows by kind. */
  epoch?: number;
  pendingKinds?: Record<string, number>;
}

export interface BacklogBenchResult {
  seconds: number;
  clients: number;
  epochMs: number;
  perceives: number;
  errors: number;
  errorStatus: Record<string, number>;
  perceiveRps: number;
  p99Ms: number;
  samples: BacklogSample[];
  /** During the load: the largest pending count and the oldest pending row seen. */
  maxPending: number;
  maxOldestPendingMs: number;
  maxOldestOpenMs: number;
  maxOldestLedgerOpenMs: number;
  /** From the end of the load until no row was pending, and until none was pending or submitted (-1: not within the drain window). */
  pendingZeroAfterMs: number;
  /** The first sample after the load with no pending row that was written during it (an anchor and a head update are queued every epoch, load or not). */
  loadPendingZeroAfterMs: number;
  openZeroAfterMs: number;
  /** From the end of the load until every ledger row was confirmed on Cortex. */
  ledgerConfirmedAfterMs: number;
  /** Ledger mirror rows (mint/burn) written, and Cortex transactions the outbox confirmed. */
  ledgerRows: number;
  chainTxs: number;
}

const SHIFT = 38000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The open rows only (on the status indexes): counting the whole outbox every 500 ms cost the
// database 60-140 ms a sample once it held a few hundred thousand rows, which the platform under
// measurement then lacked. The confirmed count is read only for the lines printed (every 5 s).
// The ledger rows (ChainLedgerIntent) are open while pending or while the settle row they ride on is.
async function sampleOutbox(db: pg.Client, t0: number, withConfirmed = false, loadEnded = 0): Promise<BacklogSample> {
  const { rows } = await db.query(
    `WITH open AS (
      SELECT status, kind, "createdAt" FROM "ChainOutbox" WHERE status IN ('pending', 'submitted')
      UNION ALL SELECT 'pending', kind, "createdAt" FROM "ChainLedgerIntent" WHERE status = 'pending'
      UNION ALL SELECT s.status, l.kind, l."createdAt" FROM "ChainOutbox" s JOIN "ChainLedgerIntent" l ON l."settlementId" = s.id
        WHERE s.kind = 'settle' AND s.status IN ('pending', 'submitted'))
    SELECT
      count(*) FILTER (WHERE status = 'pending')::int AS pending,
      count(*) FILTER (WHERE status = 'submitted')::int AS submitted,
      coalesce(extract(epoch FROM now() - min("createdAt") FILTER (WHERE status = 'pending')) * 1000, 0)::int AS "oldestPendingMs",
      coalesce(extract(epoch FROM now() - min("createdAt")) * 1000, 0)::int AS "oldestOpenMs",
      count(*) FILTER (WHERE kind IN ('mint', 'burn'))::int AS "ledgerOpen",
      coalesce(extract(epoch FROM now() - min("createdAt") FILTER (WHERE kind IN ('mint', 'burn'))) * 1000, 0)::int AS "oldestLedgerOpenMs",
      (array_agg(kind ORDER BY "createdAt") FILTER (WHERE status = 'pending'))[1] AS "oldestPendingKind",
      count(*) FILTER (WHERE status = 'pending' AND "createdAt" <= $1)::int AS "pendingFromLoad"
    FROM open`,
    [loadEnded ? new Date(loadEnded) : new Date(8.64e15)],
  );
  const failed = Number(
    (
      await db.query(
        `SELECT (SELECT count(*) FROM "ChainOutbox" WHERE status = 'failed') + (SELECT count(*) FROM "ChainLedgerIntent" WHERE status = 'failed') AS n`,
      )
    ).rows[0].n,
  );
  const confirmed = withConfirmed
    ? Number(
        (
          await db.query(`SELECT (SELECT count(*) FROM "ChainOutbox" WHERE status = 'confirmed')
            + (SELECT count(*) FROM "ChainLedgerIntent" l LEFT JOIN "ChainOutbox" s ON s.id = l."settlementId" WHERE coalesce(s.status, l.status) = 'confirmed') AS n`)
        ).rows[0].n,
      )
    : undefined;
  const kinds = await db.query(`SELECT kind, count(*)::int AS n FROM "ChainOutbox" WHERE status = 'pending' GROUP BY kind
    UNION ALL SELECT kind, count(*)::int FROM "ChainLedgerIntent" WHERE status = 'pending' GROUP BY kind`);
  return { t: Math.round((Date.now() - t0) / 100) / 10, ...rows[0], failed, confirmed, pendingKinds: Object.fromEntries(kinds.rows.map((r) => [r.kind, r.n])) };
}

export async function runBacklogBench(
  opts: { seconds?: number; clients?: number; epochMs?: number; drainS?: number; cpuProfDir?: string; log?: (line: string) => void } = {},
): Promise<BacklogBenchResult> {
  const seconds = opts.seconds ?? 60;
  const clients = opts.clients ?? 32;
  const epochMs = opts.epochMs ?? 1000;
  const drainS = opts.drainS ?? 60;
  const log = opts.log ?? (() => {});
  const database = await freshDatabase();
  // Every write adds drift, and past twice COG_DRIFT_MAX the watchdog decommissions the sleeve: the
  // bench measures the outbox under writes, so the limit is out of reach (as in bench/perceive.ts).
  const env: Record<string, string> = { DATABASE_URL: database.url, COG_EPOCH_INTERVAL_MS: String(epochMs), LOG_LEVEL: 'warn', COG_DRIFT_MAX: '1000000' };
  if (opts.cpuProfDir) fs.mkdirSync(opts.cpuProfDir, { recursive: true });
  const nodeArgs = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(opts.cpuProfDir)}`] : [];
  const c = await startCluster({ mode: 'embedded', shift: SHIFT, env, nodeArgs });
  const db = new pg.Client({ connectionString: database.url });
  try {
    await c.waitHealthy(180_000);
    await db.connect();
    const g = c.gateway;
    // Setup: a stack and a sleeve per client.
    const writers = await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        const s = await call('POST', `${g}/v1/stacks`, { name: `outbox-${i}` });
        if (s.status !== 201 && s.status !== 200) throw new Error(`POST /v1/stacks: ${s.status} ${JSON.stringify(s.body)}`);
        return { stackId: s.body.id as string, sleeveId: '', compute: 0 };
      }),
    );
    const renew = async (w: (typeof writers)[number]) => {
      const s = await call('POST', `${g}/v1/sleeves`, { stackId: w.stackId, embodimentType: 'ai' });
      if (s.status !== 201 && s.status !== 200) throw new Error(`POST /v1/sleeves: ${s.status} ${JSON.stringify(s.body)}`);
      if (w.sleeveId) await call('DELETE', `${g}/v1/sleeves/${w.sleeveId}`);
      w.sleeveId = s.body.id;
      w.compute = 250;
    };
    for (const w of writers) await renew(w);
    // Let the setup's own chain rows settle, so the figures are the load's.
    for (let i = 0; i < 120; i++) {
      const s = await sampleOutbox(db, Date.now());
      if (s.pending + s.submitted === 0) break;
      await sleep(500);
    }
    const before = Number((await db.query(`SELECT count(*)::int AS n FROM "ChainOutbox"`)).rows[0].n);
    const beforeConfirmed = Number(
      (await db.query(`SELECT count(DISTINCT "txHash")::int AS n FROM "ChainOutbox" WHERE status = 'confirmed' AND "txHash" IS NOT NULL`)).rows[0].n,
    );

    const t0 = Date.now();
    const samples: BacklogSample[] = [];
    let loadEnded = 0;
    let sampling = true;
    // Medulla's epoch, read every 100 ms: when each epoch was first seen, so a sample past two
    // epochs shows whether the epoch itself ran long (its rows wait for its end) or the mirror lagged.
    const epochSeen = new Map<number, number>();
    let lastEpoch = Number.NaN;
    // Each poll's answer time too: a poll that takes seconds is the platform's event loop held (or
    // the machine starved), not the mirror.
    const polls: Array<{ at: number; ms: number }> = [];
    const epochWatch = (async () => {
      while (sampling) {
        const t = performance.now();
        const e = Number((await call('GET', `${c.urls.medulla}/health`, undefined, 5000).catch(() => undefined))?.body?.epoch ?? Number.NaN);
        polls.push({ at: Date.now(), ms: Math.round(performance.now() - t) });
        if (Number.isFinite(e)) lastEpoch = e;
        if (Number.isFinite(e) && !epochSeen.has(e)) epochSeen.set(e, Date.now());
        await sleep(100);
      }
    })();
    const epochAge = (e: number | undefined) => (e !== undefined && epochSeen.has(e) ? Date.now() - epochSeen.get(e)! : Number.NaN);
    const epochLength = (e: number) => (epochSeen.has(e) && epochSeen.has(e + 1) ? epochSeen.get(e + 1)! - epochSeen.get(e)! : Number.NaN);
    const sampler = (async () => {
      let lastPrint = 0;
      while (sampling) {
        const print = Date.now() - lastPrint >= 5000;
        const s = await sampleOutbox(db, t0, print, loadEnded);
        s.epoch = lastEpoch; // the watcher's, read at most 100 ms ago
        samples.push(s);
        // Every sample past two epochs is printed too, with what was pending.
        if (print || s.oldestPendingMs > 2 * epochMs) {
          if (print) lastPrint = Date.now();
          log(
            `t=${s.t.toFixed(1)}s${loadEnded ? ' (drain)' : ''} pending ${s.pending} submitted ${s.submitted} confirmed ${s.confirmed} failed ${s.failed}; oldest pending ${s.oldestPendingMs} ms (${s.oldestPendingKind ?? '-'}), oldest open ${s.oldestOpenMs} ms; ledger rows open ${s.ledgerOpen}, oldest ${s.oldestLedgerOpenMs} ms; epoch ${s.epoch} (seen ${epochAge(s.epoch)} ms ago, the one before lasted ${epochLength(s.epoch! - 1)} ms; slowest /health in the last 5 s ${Math.max(0, ...polls.filter((q) => q.at > Date.now() - 5000).map((q) => q.ms))} ms); pending ${JSON.stringify(s.pendingKinds)}`,
          );
        }
        if (loadEnded && s.pending === 0 && s.ledgerOpen === 0 && Date.now() - loadEnded > 10_000) return;
        if (loadEnded && Date.now() - loadEnded > drainS * 1000) return;
        await sleep(loadEnded ? 200 : 500); // finer after the load: the drain time is read from these
      }
    })();
    const lat: number[] = [];
    let perceives = 0;
    let errors = 0;
    const errorStatus: Record<string, number> = {};
    const deadline = t0 + seconds * 1000;
    await Promise.all(
      writers.map(async (w, i) => {
        for (let n = 0; Date.now() < deadline; n++) {
          if (
            w.compute < 5 &&
            !(await renew(w).then(
              () => true,
              () => false,
            ))
          ) {
            errors++;
            await sleep(300);
            continue;
          }
          const r = await call('POST', `${g}/v1/sleeves/${w.sleeveId}/perceive`, { input: `outbox ${i} ${n} ${Date.now()}` }).catch(() => undefined);
          if (r?.status === 200 || r?.status === 201) {
            perceives++;
            lat.push(r.ms);
            w.compute -= 0.5;
          } else {
            errors++;
            // The platform retired the sleeve (its watchdog): carry on with a new one.
            if (r?.status === 409 && r.body?.code === 'SLEEVE_DECOMMISSIONED') w.compute = 0;
            const k = String(r?.status ?? 'network');
            errorStatus[k] = (errorStatus[k] ?? 0) + 1;
            if (errorStatus[k] === 1) log(`perceive error ${k}: ${JSON.stringify(r?.body).slice(0, 200)}`);
            await sleep(100);
          }
        }
      }),
    );
    loadEnded = Date.now();
    const loadSecs = (loadEnded - t0) / 1000;
    await sampler;
    sampling = false;
    await epochWatch;
    {
      // The epochs that began and ended during the load, by length.
      const during = [...epochSeen].filter(([e, at]) => at >= t0 && at <= loadEnded && epochSeen.has(e + 1)).map(([e]) => epochLength(e));
      during.sort((a, b) => a - b);
      if (during.length)
        log(
          `epochs during load: ${during.length}, length p50 ${during[Math.floor(during.length / 2)]} ms, p99 ${during[Math.ceil(0.99 * during.length) - 1]} ms, longest ${during.at(-1)} ms; over 2 intervals: ${during.filter((l) => l > 2 * epochMs).length}`,
        );
    }
    lat.sort((a, b) => a - b);
    const during = samples.filter((s) => s.t * 1000 <= loadEnded - t0);
    const after = samples.filter((s) => s.t * 1000 > loadEnded - t0);
    const firstAfter = (f: (s: BacklogSample) => boolean) => {
      const s = after.find(f);
      return s ? Math.round(s.t * 1000 - (loadEnded - t0)) : -1;
    };
    const { rows } = await db.query(
      `SELECT (SELECT count(*) FROM "ChainLedgerIntent")::int AS ledger, ((SELECT count(*) FROM "ChainLedgerIntent") + (SELECT count(*) FROM "ChainOutbox"))::int AS total`,
    );
    const confirmedTxs = Number(
      (await db.query(`SELECT count(DISTINCT "txHash")::int AS n FROM "ChainOutbox" WHERE status = 'confirmed' AND "txHash" IS NOT NULL`)).rows[0].n,
    );
    void before;
    // The platform's own Cortex warnings (a failed submitter round, a re-send), counted by message.
    const warnings = new Map<string, number>();
    for (const line of c.output().split('\n')) {
      const m = /"msg":"(cortex[^"]*)"/.exec(line) ?? /(cortex[^{\n]*?)(?: \{|$)/.exec(line);
      if (m) warnings.set(m[1]!, (warnings.get(m[1]!) ?? 0) + 1);
    }
    for (const [msg, n] of warnings) log(`platform log: ${n}x ${msg}`);
    // Where the slow submitter rounds spent their time (the first 20).
    const slow = c
      .output()
      .split('\n')
      .filter((l) => l.includes('cortex submitter: slow round'))
      .map((l) => /settleMs[^}]*/.exec(l)?.[0] ?? l.slice(0, 200));
    if (slow.length) log(`slow rounds: ${slow.slice(0, 20).join(' | ')}`);
    if (process.env.OUTBOX_BENCH_TAIL) log(c.output().slice(-Number(process.env.OUTBOX_BENCH_TAIL)));
    const drift = /"msg":"cortex: database and chain disagree[^\n]*|[^\n]*"drift":[^\n]*/.exec(c.output());
    if (drift) log(`drift reported: ${drift[0].slice(0, 1500)}`);
    const firstErr = /"msg":"cortex submitter: round failed[^\n]*/.exec(c.output());
    if (firstErr) log(`first failed round: ${firstErr[0].slice(0, 400)}`);
    return {
      seconds: loadSecs,
      clients,
      epochMs,
      perceives,
      errors,
      errorStatus,
      perceiveRps: Math.round((perceives / loadSecs) * 10) / 10,
      p99Ms: lat.length ? lat[Math.min(lat.length - 1, Math.ceil(0.99 * lat.length) - 1)]! : 0,
      samples,
      maxPending: Math.max(0, ...during.map((s) => s.pending)),
      maxOldestPendingMs: Math.max(0, ...during.map((s) => s.oldestPendingMs)),
      maxOldestOpenMs: Math.max(0, ...during.map((s) => s.oldestOpenMs)),
      maxOldestLedgerOpenMs: Math.max(0, ...during.map((s) => s.oldestLedgerOpenMs)),
      pendingZeroAfterMs: firstAfter((s) => s.pending === 0),
      loadPendingZeroAfterMs: firstAfter((s) => s.pendingFromLoad === 0),
      openZeroAfterMs: firstAfter((s) => s.pending + s.submitted === 0),
      ledgerConfirmedAfterMs: firstAfter((s) => s.ledgerOpen === 0),
      ledgerRows: Number(rows[0].ledger),
      chainTxs: confirmedTxs - beforeConfirmed,
    };
  } finally {
    await db.end().catch(() => {});
    await c.stop();
    await database.drop().catch(() => {});
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  if (args.includes('--throughput')) {
    const [count, blockTime] = args.filter((a) => !a.startsWith('--')).map(Number);
    const r = await runOutboxBench({ count: count || 200, blockTime: blockTime ?? 1 });
    console.log(`cortex outbox vs raw ethers, ${r.count} StackIdentity.mint, ${r.blockTime} s blocks (Node ${process.version})`);
    console.log(`raw ethers : ${r.rawTps.toFixed(1)} tx/s over ${r.rawBlocks} blocks`);
    console.log(`outbox     : ${r.outboxTps.toFixed(1)} tx/s over ${r.outboxBlocks} blocks`);
    console.log(`outbox/raw : ${r.ratio.toFixed(2)}`);
  } else {
    const r = await runBacklogBench({
      seconds: Number(flag('seconds') ?? 60),
      clients: Number(flag('clients') ?? 32),
      epochMs: Number(flag('epoch-ms') ?? 1000),
      drainS: Number(flag('drain-s') ?? 60),
      cpuProfDir: flag('cpu-prof'),
      log: (l) => console.log(l),
    });
    const e = r.epochMs;
    console.log(
      `cortex outbox under perceive load: ${r.clients} clients over ${r.clients} stacks, ${r.seconds.toFixed(0)} s, ${e} ms epochs, PostgreSQL (Node ${process.version})`,
    );
    console.log(`perceive      : ${r.perceives} ok (${r.perceiveRps} req/s, p99 ${r.p99Ms} ms), ${r.errors} errors ${JSON.stringify(r.errorStatus)}`);
    console.log(`ledger rows   : ${r.ledgerRows} mint/burn intents, ${r.chainTxs} Cortex transactions confirmed during the run`);
    console.log(
      `during load   : max pending ${r.maxPending}, oldest pending at most ${r.maxOldestPendingMs} ms (${(r.maxOldestPendingMs / e).toFixed(1)} epochs), oldest open ${r.maxOldestOpenMs} ms, oldest unconfirmed ledger row ${r.maxOldestLedgerOpenMs} ms`,
    );
    console.log(
      `after load    : no pending row written during the load after ${r.loadPendingZeroAfterMs} ms (${(r.loadPendingZeroAfterMs / e).toFixed(1)} epochs), no pending row at all after ${r.pendingZeroAfterMs} ms (${(r.pendingZeroAfterMs / e).toFixed(1)} epochs), every ledger row confirmed after ${r.ledgerConfirmedAfterMs} ms, nothing open after ${r.openZeroAfterMs} ms (-1: not within the drain window; anchors and head updates keep coming every epoch)`,
    );
  }
}
