// The scale bench (issue 14, item 4; docs/scale.md, "Scale bench"): a real platform on this
// machine's PostgreSQL over many stacks and sleeves, for E epochs:
//   * fixtures inserted in bulk (INSERT ... SELECT generate_series) into a fresh database: S stacks
//     (created long ago, idle past their emission floor, their EmissionAccrual rows tallied by the
//     emitter's own first epoch, run here before the platform starts), V sleeves of which the first
//     T are alive human sleeves ticking every tickRate ms, one on each of the first T stacks (with
//     compute to write with); the others are decommissioned;
//   * the platform as `cog start` runs it (embedded: worker runner, Medulla epochs, Thalamus fold,
//     Treasury, gateway, one sleeve runtime) on PostgreSQL, NATS and Redis, plus a second sleeve
//     runtime process (`cog service sleeve-runtime`): the T sleeves split across the two;
//   * each epoch, 1% of the stacks (A = S / 100) write once through the real write path (POST
//     /v1/perceive on the gateway), taken in turn from the T stacks with a sleeve;
//   * per epoch: each pass's time (PassRun: finishedAt - startedAt) and the Thalamus fold's
//     (cog_thalamus_fold_duration_seconds), their sum against the epoch interval (the baseline),
//     the rows written (pg_stat_user_tables n_tup_ins + upd + del, per table), the WAL bytes
//     (pg_current_wal_lsn) and the growth of the database (pg_database_size), the tick lateness p99
//     of both runtimes (cog_sleeve_tick_lateness_seconds) against the tick period, and the writes
//     that landed; at the end, the rows written during the run that belong to a stack that never
//     wrote (an idle stack), read by xmin from every table keyed by stack, sleeve or account.
//   flock /tmp/cog-bench.lock npx tsx bench/scale.ts [stacks=10000] [--sleeves=2*stacks] [--ticking=stacks/10]
//     [--epochs=30] [--active=0.01] [--tick-rate=8000] [--epoch-ms=4000] [--concurrency=32] [--shift=18000] [--profile=DIR]
//     [--weights=1,1] (COG_SLEEVE_RUNTIME_WEIGHT of the platform's runtime, then of the second runtime process)
// --profile: one .cpuprofile of the measured epochs for the platform and one for the second runtime
// in DIR (summary: npx tsx bench/profile-summary.ts <file>).
// The issue's size: `bench/scale.ts 1000000` (2,000,000 sleeves, 100,000 ticking).
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { fromHex, wrapSecret, randomSecret } from '../lib/crypto.ts';
import { PLATFORM_NODE_FLAGS } from '../bin/node-flags.ts';
import { startCluster, type Cluster } from '../test/helpers/cluster.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';

export interface ScaleOptions {
  stacks: number;
  sleeves: number;
  ticking: number;
  epochs: number;
  active: number;
  tickRateMs: number;
  epochMs: number;
  concurrency: number;
  shift: number;
  /** A directory: the platform and the second runtime are CPU-profiled over the measured epochs (bench/cpu-profile.mjs). */
  profile?: string;
  /** COG_SLEEVE_RUNTIME_WEIGHT of the platform's own runtime and of the second runtime process. */
  weights: [number, number];
}

export function scaleOptions(argv: string[]): ScaleOptions {
  const arg = (k: string) => argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
  const num = (k: string, d: number) => {
    const v = arg(k);
    if (v === undefined) return d;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${k}=${v}: not a number`);
    return n;
  };
  const stacks = Number(argv.find((a) => /^\d+$/.test(a)) ?? 10_000);
  return {
    stacks,
    sleeves: num('sleeves', 2 * stacks),
    ticking: num('ticking', Math.max(1, Math.floor(stacks / 10))),
    epochs: num('epochs', 30),
    active: num('active', 0.01),
    tickRateMs: num('tick-rate', 8000),
    epochMs: num('epoch-ms', 4000),
    concurrency: num('concurrency', 32),
    shift: num('shift', 18_000),
    profile: arg('profile') ? path.resolve(arg('profile')!) : undefined,
    weights: weightsOf(arg('weights') ?? '1,1'),
  };
}

function weightsOf(v: string): [number, number] {
  const w = v.split(',').map(Number);
  if (w.length !== 2 || !w.every((x) => Number.isInteger(x) && x >= 0 && x <= 1000))
    throw new Error(`--weights=${v}: two weights 0-1000, the platform's runtime's then the second runtime's`);
  return [w[0]!, w[1]!];
}

/** The fixtures' ids: stack g and sleeve g (1-based), as Shape A spells them. */
export const stackId = (g: number) => `stack:human:${g}:${md5hex8(g)}`;
export const sleeveId = (g: number) => `sleeve:human:${g}:${md5hex8(-g)}`;
/** What the SQL below computes: substr(md5(g::text), 1, 8). */
const md5hex8 = (g: number) => createHash('md5').update(String(g)).digest('hex').slice(0, 8);

const STACK_SQL = (g: string) => `'stack:human:' || ${g} || ':' || substr(md5((${g})::text), 1, 8)`;
const SLEEVE_SQL = (g: string) => `'sleeve:human:' || ${g} || ':' || substr(md5((-(${g}))::text), 1, 8)`;
/** Epoch the fixtures were created in: long enough ago that every idle stack is at its emission floor. */
export const CREATED_EPOCH = -1000;
/** Compute each writing sleeve holds (milli): 2,000 writes at 0.5. */
const COMPUTE_MILLI = 1_000_000n;

export interface Fixtures {
  ms: number;
  /** The emitter's first epoch (0), every stack joining the running sums once. */
  tallyMs: number;
}

/**
 * Inserts the fixtures into an empty, migrated database: `stacks` stacks (the first `ticking` with a
 * master secret sealed under masterKeyHex, the others with a placeholder: they never write), their
 * accrual rows as openAccrual writes them at CREATED_EPOCH, `sleeves` sleeves (sleeve g on stack
 * ((g - 1) mod stacks) + 1, alive and ticking for g <= ticking, decommissioned otherwise; the alive
 * ones' stale-ordering residue taken as already reported), compute for the alive ones, then
 * ANALYZE. The tally (emitEpoch of epoch 0) is the caller's, through the economy's own door.
 */
export async function insertFixtures(
  db: pg.ClientBase,
  o: Pick<ScaleOptions, 'stacks' | 'sleeves' | 'ticking' | 'tickRateMs'>,
  masterKeyHex: string,
): Promise<number> {
  const t0 = performance.now();
  const { stacks: S, sleeves: V, ticking: T } = o;
  if (T > S || T > V) throw new Error(`ticking (${T}) must be at most stacks (${S}) and sleeves (${V})`);
  const kek = fromHex(masterKeyHex);
  const stackCols = `(id, "tokenId", name, kind, shape, "pubKey", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", epoch, "masterSecret", "chainStatus")`;
  const stackVals = (g: string, secret: string) =>
    `${STACK_SQL(g)}, ${g}, 'bench ' || ${g}, 'human', 'A', md5((${g})::text) || md5('k' || ${g}), 1, 0.5 + (${g} % 3) * 0.5, 1, 1, 2 - (${g} % 5) * 0.25, 0, ${secret}, 'confirmed'`;
  // The writing stacks' secrets are sealed here (the platform unseals them with the same key).
  const CHUNK = 20_000;
  for (let from = 1; from <= T; from += CHUNK) {
    const n = Math.min(CHUNK, T - from + 1);
    const secrets = Array.from({ length: n }, (_, i) => wrapSecret(kek, randomSecret(32), stackId(from + i)));
    await db.query(
      `INSERT INTO "Stack" ${stackCols} SELECT ${stackVals('x.g', 'u.sec')} FROM unnest($1::text[]) WITH ORDINALITY u(sec, i), LATERAL (SELECT $2::int + u.i::int - 1 AS g) x`,
      [secrets, from],
    );
  }
  for (let from = T + 1; from <= S; from += 250_000) {
    await db.query(`INSERT INTO "Stack" ${stackCols} SELECT ${stackVals('g', "'sealed'")} FROM generate_series($1::int, $2::int) g`, [
      from,
      Math.min(S, from + 249_999),
    ]);
  }
  await db.query(`SELECT setval(pg_get_serial_sequence('"Stack"', 'tokenId'), $1)`, [S]);
  // Accrual rows as openAccrual writes them at creation (accrual.ts), never active since.
  const { tailSql } = await import('../subgraphs/economy/index.ts');
  await db.query(`INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "bindingFloor", "bindingDecay",
      "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch")
    SELECT s.id, s."syncCoeff", s."memoryCoeff", s."computeCoeff", s."residueCoeff", s."routingCoeff", s."bindingFloor", s."bindingDecay",
      ${CREATED_EPOCH}, ${CREATED_EPOCH + 1}, ${CREATED_EPOCH}, ${CREATED_EPOCH + 1} + ${tailSql}
    FROM "Stack" s`);
  // Sleeves: the alive ones get their lease row from the insert trigger.
  for (let from = 1; from <= V; from += 250_000) {
    await db.query(
      `INSERT INTO "Sleeve" (id, "stackId", "embodimentType", seq, shape, alive, "tickRate", "syncEpoch", "spawnEpoch", "staleFor", "chainStatus", "decommissionedAt", "decommissionWhy")
      SELECT ${SLEEVE_SQL('g')}, ${STACK_SQL(`((g - 1) % ${S}) + 1`)}, 'human', g, 'A', g <= ${T}, ${o.tickRateMs}, 0, 0, 0, 'confirmed',
        CASE WHEN g <= ${T} THEN NULL ELSE now() END, CASE WHEN g <= ${T} THEN NULL ELSE 'bench fixture' END
      FROM generate_series($1::int, $2::int) g`,
      [from, Math.min(V, from + 249_999)],
    );
  }
  await db.query(`SELECT setval(pg_get_serial_sequence('"Sleeve"', 'seq'), $1)`, [V]);
  await db.query(
    `INSERT INTO "Balance" (account, token, milli) SELECT 'sleeve:' || ${SLEEVE_SQL('g')}, 'compute', ${COMPUTE_MILLI} FROM generate_series(1, ${T}) g`,
  );
  await db.query(`INSERT INTO "LedgerEntry" ("txId", account, token, milli, reason, epoch)
    SELECT 'fixture:' || g, 'sleeve:' || ${SLEEVE_SQL('g')}, 'compute', ${COMPUTE_MILLI}, 'faucet', ${CREATED_EPOCH} FROM generate_series(1, ${T}) g`);
  await db.query('VACUUM ANALYZE');
  return performance.now() - t0;
}

// ------------------------------------------------------------------ measurement

export interface TableRows {
  ins: number;
  upd: number;
  del: number;
}
export interface Snapshot {
  at: number;
  epoch: number;
  tables: Map<string, TableRows>;
  walLsn: string;
  dbBytes: number;
  /** Per runtime process: the lateness histogram's cumulative buckets (le in seconds -> count). */
  lateness: Array<Map<number, number>>;
  foldSum: number;
  foldCount: number;
  /** Per process: the longest event-loop delay since the previous scrape (prom-client resets it on each). */
  loopMaxMs: number[];
  writes: number;
  writeErrors: number;
}

export async function dbSnapshot(db: pg.ClientBase): Promise<Pick<Snapshot, 'tables' | 'walLsn' | 'dbBytes'>> {
  const t = await db.query<{ relname: string; ins: string; upd: string; del: string }>(
    'SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del FROM pg_stat_user_tables',
  );
  const w = await db.query<{ lsn: string; size: string }>('SELECT pg_current_wal_lsn()::text AS lsn, pg_database_size(current_database())::text AS size');
  return {
    tables: new Map(t.rows.map((r) => [r.relname, { ins: Number(r.ins), upd: Number(r.upd), del: Number(r.del) }])),
    walLsn: w.rows[0]!.lsn,
    dbBytes: Number(w.rows[0]!.size),
  };
}

/** Bytes between two WAL positions ('X/Y' hex). */
export function lsnBytes(a: string, b: string): number {
  const n = (l: string) => {
    const [hi, lo] = l.split('/');
    return Number.parseInt(hi!, 16) * 2 ** 32 + Number.parseInt(lo!, 16);
  };
  return n(b) - n(a);
}

/** Rows written per table between two snapshots (ins + upd + del), the tables with any. */
export function rowsBetween(a: Map<string, TableRows>, b: Map<string, TableRows>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, r] of b) {
    const p = a.get(name) ?? { ins: 0, upd: 0, del: 0 };
    const n = r.ins - p.ins + (r.upd - p.upd) + (r.del - p.del);
    if (n) out.set(name, n);
  }
  return out;
}

/** A histogram's cumulative buckets from Prometheus text (summed over label sets other than le). */
export function histogramBuckets(text: string, name: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}_bucket{`)) continue;
    const m = /le="([^"]+)"[^}]*\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const le = m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]);
    out.set(le, (out.get(le) ?? 0) + Number(m[2]));
  }
  return out;
}
export function metricValue(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/**
 * The q-quantile of the observations between two cumulative bucket sets, interpolated linearly
 * inside its bucket as PromQL's histogram_quantile does (the top finite bound when it falls in +Inf).
 * Undefined when nothing was observed.
 */
export function quantileBetween(a: Map<number, number>, b: Map<number, number>, q: number): number | undefined {
  const les = [...b.keys()].sort((x, y) => x - y);
  const counts = les.map((le) => (b.get(le) ?? 0) - (a.get(le) ?? 0));
  const total = counts.at(-1) ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  for (let i = 0; i < les.length; i++) {
    if (counts[i]! >= rank) {
      const hi = les[i]!;
      const lo = i ? les[i - 1]! : 0;
      const below = i ? counts[i - 1]! : 0;
      if (hi === Number.POSITIVE_INFINITY) return lo;
      const inBucket = counts[i]! - below;
      return inBucket > 0 ? lo + ((hi - lo) * (rank - below)) / inBucket : hi;
    }
  }
  return les.at(-2);
}

/**
 * Rows written since transaction `sinceXid` (their xmin; a fresh database does not wrap) that belong
 * to an idle stack (`idle(stackIdExpr)` in SQL), per table: every table with a "stackId" column,
 * Stack itself, the ledger's accounts (pool:, claimable:, and sleeve: of that stack's sleeves), the
 * sleeves' leases and the event outbox (data.stackId). Deleted rows are not seen (the per-table
 * n_tup_del of the run shows them).
 */
export async function idleStackRows(db: pg.ClientBase, sinceXid: bigint, idle: (expr: string) => string): Promise<Map<string, number>> {
  const since = (sinceXid % 2n ** 32n).toString();
  const fresh = `xmin::text::bigint >= ${since}`;
  const withStack = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'stackId' ORDER BY table_name`,
  );
  const sleeveStack = (idExpr: string) => `(SELECT "stackId" FROM "Sleeve" WHERE id = ${idExpr})`;
  const accountStack = `(CASE WHEN account LIKE 'pool:%' THEN substr(account, 6) WHEN account LIKE 'claimable:%' THEN substr(account, 11)
    WHEN account LIKE 'sleeve:%' THEN ${sleeveStack('substr(account, 8)')} END)`;
  const queries: Array<[string, string]> = [
    ...withStack.rows.map((r): [string, string] => [r.table_name, `SELECT count(*) AS n FROM "${r.table_name}" WHERE ${fresh} AND ${idle('"stackId"')}`]),
    ['Stack', `SELECT count(*) AS n FROM "Stack" WHERE ${fresh} AND ${idle('id')}`],
    ['Balance', `SELECT count(*) AS n FROM "Balance" WHERE ${fresh} AND ${idle(accountStack)}`],
    ['LedgerEntry', `SELECT count(*) AS n FROM "LedgerEntry" WHERE ${fresh} AND ${idle(accountStack)}`],
    ['SleeveLease', `SELECT count(*) AS n FROM "SleeveLease" WHERE ${fresh} AND ${idle(sleeveStack('"sleeveId"'))}`],
    ['EventOutbox', `SELECT count(*) AS n FROM "EventOutbox" WHERE ${fresh} AND ${idle(`(data->>'stackId')`)}`],
  ];
  const out = new Map<string, number>();
  for (const [table, q] of queries) out.set(table, Number((await db.query<{ n: string }>(q)).rows[0]!.n));
  return out;
}

/** The fixtures' idle stacks: those past the first `ticking` (no alive sleeve, never written to). */
export const idleOfFixtures = (ticking: number) => (expr: string) =>
  `COALESCE(${expr} LIKE 'stack:human:%' AND split_part(${expr}, ':', 3)::int > ${ticking}, false)`;

// ------------------------------------------------------------------ the run

export interface EpochFigures {
  epoch: number;
  passes: Record<string, number>;
  /** What each pass reported it did (the numbers of its PassRun result: rows emitted, residues opened, ...). */
  work: Record<string, Record<string, number>>;
  foldMs: number;
  passMs: number;
  rows: Map<string, number>;
  walBytes: number;
  dbBytes: number;
  lateP99Ms: Array<number | undefined>;
  loopMaxMs: number[];
  writes: number;
  writeErrors: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function medullaHeight(url: string): Promise<number> {
  const r = await fetch(`${url}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getinfo', params: [] }),
    signal: AbortSignal.timeout(5000),
  });
  const j = (await r.json()) as { result?: { height: number } };
  return j.result?.height ?? -1;
}

async function text(url: string): Promise<string> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
    return r.ok ? await r.text() : '';
  } catch {
    return '';
  }
}

export async function runScaleBench(o: ScaleOptions, log: (s: string) => void = console.log): Promise<void> {
  const masterKeyHex = randomBytes(32).toString('hex');
  const fresh = await freshDatabase();
  const admin = new pg.Client({ connectionString: fresh.url });
  let cluster: Cluster | undefined;
  let runtime2: ChildProcess | undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-bench-scale-'));
  const dataDir2 = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-bench-scale-rt-'));
  try {
    // Migrations, then the fixtures, then the emitter's first epoch (epoch 0) through its own door.
    const { testPlatform } = await import('../test/helpers/platform.ts');
    const tp = await testPlatform({ DATABASE_URL: fresh.url });
    await admin.connect();
    const fixturesMs = await insertFixtures(admin, o, masterKeyHex);
    const { emitEpoch } = await import('../subgraphs/economy/index.ts');
    const t0 = performance.now();
    await emitEpoch(tp, 0);
    const tallyMs = performance.now() - t0;
    await tp.cleanup();
    // The tally left every fixture's entry dead in the partial index of the untallied stacks: a
    // platform whose stacks joined over time never has them at once (each is tallied the epoch after
    // it joins, and autovacuum keeps up), and until autovacuum reached this table the emitter walked
    // them every epoch (250-990 ms at 1,000,000 stacks).
    await admin.query('VACUUM ANALYZE "EmissionAccrual"');
    const size0 = Number((await admin.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n);
    log(
      `fixtures: ${o.stacks.toLocaleString('en-US')} stacks, ${o.sleeves.toLocaleString('en-US')} sleeves (${o.ticking.toLocaleString('en-US')} alive, ticking every ${o.tickRateMs} ms) in ${(fixturesMs / 1000).toFixed(1)} s; database ${(size0 / 2 ** 20).toFixed(0)} MiB; the emitter's first epoch (every stack joining its running sums once) ${tallyMs.toFixed(0)} ms`,
    );

    // The platform, then the second runtime process.
    const env = {
      COG_DATA_DIR: dataDir,
      COG_MASTER_KEY: masterKeyHex,
      COG_EPOCH_INTERVAL_MS: String(o.epochMs),
      COG_RATE_LIMIT_PER_MIN: '0',
      // The writers never sync; their drift is out of the way (the bench measures the passes, not desyncs).
      COG_DRIFT_MAX: '1000000',
      COG_SLEEVE_RUNTIME_ID: 'sleeve-runtime-1',
      COG_SLEEVE_RUNTIME_WEIGHT: String(o.weights[0]),
      DATABASE_POOL_SIZE: '20',
      LOG_LEVEL: 'warn',
      ...(o.profile
        ? {
            NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(path.join(import.meta.dirname, 'cpu-profile.mjs')).href}`.trim(),
            COG_CPU_PROFILE_DIR: o.profile,
          }
        : {}),
    };
    const tStart = performance.now();
    cluster = await startCluster({ mode: 'embedded', shift: o.shift, realAdapters: true, databaseUrl: fresh.url, env });
    await cluster.waitHealthy(300_000, ['gateway', 'medulla']);
    const opsPort = 7095 + o.shift;
    let out2 = '';
    runtime2 = spawn(process.execPath, [...PLATFORM_NODE_FLAGS, path.join(import.meta.dirname, '..', 'bin', 'cog.mjs'), 'service', 'sleeve-runtime'], {
      cwd: path.join(import.meta.dirname, '..'),
      env: {
        ...cluster.env,
        COG_DATA_DIR: dataDir2,
        COG_SLEEVE_RUNTIME_ID: 'sleeve-runtime-2',
        COG_SLEEVE_RUNTIME_WEIGHT: String(o.weights[1]),
        COG_OPS_PORT: String(opsPort),
        SLEEVE_RUNTIME_PORT: '0',
        DATABASE_POOL_SIZE: '10',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    runtime2.stdout!.on('data', (d: Buffer) => void (out2 = (out2 + d.toString()).slice(-200_000)));
    runtime2.stderr!.on('data', (d: Buffer) => void (out2 = (out2 + d.toString()).slice(-200_000)));
    const metricsUrls = [`${cluster.gateway}/metrics`, `http://127.0.0.1:${opsPort}/metrics`];
    // Until the two runtimes hold the alive sleeves between them.
    for (;;) {
      if (runtime2.exitCode !== null) throw new Error(`the second sleeve runtime exited with ${runtime2.exitCode}:\n${out2.slice(-3000)}`);
      const r = await admin.query<{ runtime: string; n: string }>(
        `SELECT l.runtime, count(*) AS n FROM "SleeveLease" l JOIN "SleeveRuntimeBeat" b ON b.id = l.runtime AND b.gen = l.gen AND b."expiresAt" > now() GROUP BY l.runtime`,
      );
      const held = r.rows.filter((x) => x.runtime).map((x) => Number(x.n));
      const holders = o.weights.every((w) => w === 0) ? 2 : o.weights.filter((w) => w > 0).length;
      if (held.length === holders && held.reduce((a, b) => a + b, 0) === o.ticking) {
        log(`platform up in ${((performance.now() - tStart) / 1000).toFixed(1)} s; the sleeves split ${held.join(' / ')} across the two runtime processes`);
        break;
      }
      if (performance.now() - tStart > 600_000) throw new Error(`the runtimes did not split the sleeves: ${JSON.stringify(r.rows)}`);
      await sleep(500);
    }

    // The writers: A stacks an epoch, in turn over the T stacks with a sleeve, over HTTP.
    const A = Math.max(1, Math.round(o.stacks * o.active));
    const queue: number[] = [];
    let next = 0;
    let writes = 0;
    let writeErrors = 0;
    let lastError = '';
    const written = new Set<number>();
    let stop = false;
    const writer = async () => {
      while (!stop) {
        const g = queue.shift();
        if (g === undefined) {
          await sleep(20);
          continue;
        }
        try {
          const r = await fetch(`${cluster!.gateway}/v1/perceive`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ stackId: stackId(g), sleeveId: sleeveId(g), text: `observation of stack ${g} at ${Date.now()}` }),
            signal: AbortSignal.timeout(60_000),
          });
          const body = await r.text();
          if (r.ok) {
            writes++;
            written.add(g);
          } else {
            writeErrors++;
            lastError = `${r.status} ${body.slice(0, 200)}`;
          }
        } catch (e) {
          writeErrors++;
          lastError = (e as Error).message;
        }
      }
    };
    const writers = Array.from({ length: o.concurrency }, writer);

    const snap = async (epoch: number): Promise<Snapshot> => {
      const texts = await Promise.all(metricsUrls.map(text));
      return {
        at: performance.now(),
        epoch,
        ...(await dbSnapshot(admin)),
        lateness: texts.map((t) => histogramBuckets(t, 'cog_sleeve_tick_lateness_seconds')),
        foldSum: metricValue(texts[0]!, 'cog_thalamus_fold_duration_seconds_sum'),
        foldCount: metricValue(texts[0]!, 'cog_thalamus_fold_duration_seconds_count'),
        loopMaxMs: texts.map((t) => metricValue(t, 'nodejs_eventloop_lag_max_seconds') * 1000),
        writes,
        writeErrors,
      };
    };
    // One warm-up epoch (the first writes, the runtimes' first ticks), then E measured ones.
    let epoch = await medullaHeight(cluster.urls.medulla!);
    const waitEpoch = async (after: number) => {
      for (;;) {
        const h = await medullaHeight(cluster!.urls.medulla!).catch(() => -1);
        if (h > after) return h;
        await sleep(50);
      }
    };
    const enqueue = () => {
      for (let i = 0; i < A; i++) queue.push((next++ % o.ticking) + 1);
    };
    epoch = await waitEpoch(epoch);
    enqueue();
    epoch = await waitEpoch(epoch);
    const [{ xid }] = (await admin.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid')).rows;
    const startXid = BigInt(xid!);
    const writtenBefore = new Set(written);
    const snaps: Snapshot[] = [await snap(epoch)];
    log(
      `measuring ${o.epochs} epochs of ${o.epochMs} ms from epoch ${epoch}: ${A.toLocaleString('en-US')} stacks written per epoch (${(o.active * 100).toFixed(2)}%), concurrency ${o.concurrency}; load ${os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );
    const first = epoch;
    const loads: number[] = [];
    const profiled = o.profile ? [cluster.pid, runtime2.pid!] : [];
    for (const pid of profiled) process.kill(pid, 'SIGUSR2');
    enqueue();
    while (epoch < first + o.epochs) {
      epoch = await waitEpoch(epoch);
      snaps.push(await snap(epoch));
      loads.push(os.loadavg()[0]);
      if (epoch < first + o.epochs) enqueue();
    }
    for (const pid of profiled) process.kill(pid, 'SIGUSR2');
    stop = true;
    const backlog = queue.length;
    queue.length = 0;
    await Promise.all(writers);
    await sleep(o.profile ? 5000 : 1500); // the last epoch's passes finish (and the profiles are written)
    // Each measured epoch's figures.
    const runs = await admin.query<{ pass: string; epoch: number; ms: number; result: unknown }>(
      `SELECT pass, epoch, (EXTRACT(EPOCH FROM "finishedAt" - "startedAt") * 1000)::float AS ms, result FROM "PassRun" WHERE epoch > $1 AND epoch <= $2`,
      [first, first + o.epochs],
    );
    const passNames = [...new Set(runs.rows.map((r) => r.pass))].sort();
    const figures: EpochFigures[] = [];
    for (let i = 1; i < snaps.length; i++) {
      const a = snaps[i - 1]!;
      const b = snaps[i]!;
      // The passes of the epoch that began at b's predecessor, i.e. epoch a.epoch + 1 .. b.epoch.
      const passes: Record<string, number> = {};
      const work: Record<string, Record<string, number>> = {};
      for (const r of runs.rows)
        if (r.epoch > a.epoch && r.epoch <= b.epoch) {
          passes[r.pass] = (passes[r.pass] ?? 0) + (r.ms ?? 0);
          const w = (work[r.pass] ??= {});
          for (const [k, v] of Object.entries((r.result ?? {}) as Record<string, unknown>)) if (typeof v === 'number') w[k] = (w[k] ?? 0) + v;
        }
      const foldMs = b.foldCount > a.foldCount ? (b.foldSum - a.foldSum) * 1000 : 0;
      const passMs = Object.values(passes).reduce((x, y) => x + y, 0);
      figures.push({
        epoch: b.epoch,
        passes,
        work,
        foldMs,
        passMs,
        rows: rowsBetween(a.tables, b.tables),
        walBytes: lsnBytes(a.walLsn, b.walLsn),
        dbBytes: b.dbBytes - a.dbBytes,
        lateP99Ms: b.lateness.map((l, k) => {
          const v = quantileBetween(a.lateness[k] ?? new Map(), l, 0.99);
          return v === undefined ? undefined : v * 1000;
        }),
        loopMaxMs: b.loopMaxMs,
        writes: b.writes - a.writes,
        writeErrors: b.writeErrors - a.writeErrors,
      });
    }
    const last = snaps.at(-1)!;
    const idle = await idleStackRows(admin, startXid, (e) => `${idleOfFixtures(o.ticking)(e)}`);
    const idleStacks = o.stacks - o.ticking;
    const lateAll = last.lateness.map((l, k) => quantileBetween(snaps[0]!.lateness[k] ?? new Map(), l, 0.99));
    const ticks = last.lateness.map((l, k) => (l.get(Number.POSITIVE_INFINITY) ?? 0) - (snaps[0]!.lateness[k]?.get(Number.POSITIVE_INFINITY) ?? 0));
    const seconds = (last.at - snaps[0]!.at) / 1000;
    const leases = await admin.query<{ runtime: string; n: string }>(`SELECT runtime, count(*) AS n FROM "SleeveLease" GROUP BY runtime ORDER BY runtime`);

    // What the processes logged (warnings: failed ticks, lease rounds, passes), by message.
    const warned = new Map<string, number>();
    for (const line of `${cluster.output()}\n${out2}`.split('\n')) {
      const m = /"msg":"([^"]+)"/.exec(line);
      const err = /"(?:err|lastError)":\[?"([^"]{0,80})/.exec(line);
      if (m) warned.set(`${m[1]}${err ? ` (${err[1]})` : ''}`, (warned.get(`${m[1]}${err ? ` (${err[1]})` : ''}`) ?? 0) + 1);
    }

    // The report.
    const pad = (s: string | number, n: number) => String(s).padStart(n);
    const short: Record<string, string> = {
      'drift-checker': 'drift',
      'epoch-anchor': 'anchor',
      'residue-collector': 'residue',
      'memory-reconciler': 'memory',
      'treasury-emitter': 'treasury',
      'sleeve-watchdog': 'watchdog',
    };
    log(
      `\n${pad('epoch', 6)} ${passNames.map((n) => pad(short[n] ?? n, 9)).join('')}${pad('fold', 8)}${pad('sum', 8)}${pad('/epoch', 8)}${pad('writes', 8)}${pad('rows', 9)}${pad('WAL KiB', 9)}${pad('DB KiB', 8)}${pad('late p99 ms', 14)}${pad('loop max ms', 13)}`,
    );
    for (const f of figures) {
      const sum = f.passMs + f.foldMs;
      log(
        `${pad(f.epoch, 6)} ${passNames.map((n) => pad((f.passes[n] ?? 0).toFixed(0), 9)).join('')}${pad(f.foldMs.toFixed(0), 8)}${pad(sum.toFixed(0), 8)}${pad(`${((sum / o.epochMs) * 100).toFixed(1)}%`, 8)}${pad(f.writes, 8)}${pad(
          [...f.rows.values()].reduce((x, y) => x + y, 0),
          9,
        )}${pad((f.walBytes / 1024).toFixed(0), 9)}${pad((f.dbBytes / 1024).toFixed(0), 8)}${pad(f.lateP99Ms.map((x) => (x === undefined ? '-' : x.toFixed(0))).join('/'), 14)}${pad(f.loopMaxMs.map((x) => x.toFixed(0)).join('/'), 13)}`,
      );
    }
    const n = figures.length;
    const mean = (f: (x: EpochFigures) => number) => figures.reduce((s, x) => s + f(x), 0) / Math.max(1, n);
    const sorted = (f: (x: EpochFigures) => number) => figures.map(f).sort((x, y) => x - y);
    const q = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? 0;
    const sums = sorted((f) => f.passMs + f.foldMs);
    const byTable = new Map<string, number>();
    for (const f of figures) for (const [t, k] of f.rows) byTable.set(t, (byTable.get(t) ?? 0) + k);
    const totalRows = [...byTable.values()].reduce((x, y) => x + y, 0);
    log(
      `\nper epoch over ${n} epochs (${seconds.toFixed(0)} s, load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} on ${os.cpus().length} cores):`,
    );
    for (const name of passNames) {
      const xs = sorted((f) => f.passes[name] ?? 0);
      const keys = [...new Set(figures.flatMap((f) => Object.keys(f.work[name] ?? {})))];
      const did = keys.map((k) => `${k} ${mean((f) => f.work[name]?.[k] ?? 0).toFixed(1)}`).join(', ');
      log(
        `  ${name.padEnd(18)} mean ${mean((f) => f.passes[name] ?? 0).toFixed(0)} ms, min ${xs[0]!.toFixed(0)}, p50 ${q(xs, 0.5).toFixed(0)}, max ${xs.at(-1)!.toFixed(0)}${did ? ` (an epoch: ${did})` : ''}`,
      );
    }
    const folds = sorted((f) => f.foldMs);
    log(
      `  ${'thalamus fold'.padEnd(18)} mean ${mean((f) => f.foldMs).toFixed(0)} ms, min ${folds[0]!.toFixed(0)}, p50 ${q(folds, 0.5).toFixed(0)}, max ${folds.at(-1)!.toFixed(0)}`,
    );
    const meanSum = mean((f) => f.passMs + f.foldMs);
    log(
      `  all passes + fold  mean ${meanSum.toFixed(0)} ms = ${((meanSum / o.epochMs) * 100).toFixed(1)}% of the ${o.epochMs} ms epoch (ratio ${(meanSum / o.epochMs).toFixed(3)}; min ${(((sums[0] ?? 0) / o.epochMs) * 100).toFixed(1)}%, p50 ${((q(sums, 0.5) / o.epochMs) * 100).toFixed(1)}%, max ${(((sums.at(-1) ?? 0) / o.epochMs) * 100).toFixed(1)}%; target <= 10%)`,
    );
    log(
      `  writes: ${mean((f) => f.writes).toFixed(0)} an epoch landed of ${A} asked (${writes - snaps[0]!.writes} in all, ${writeErrors} refused${lastError ? `, last: ${lastError}` : ''}; ${backlog} still queued at the end)`,
    );
    log(
      `  rows written: ${(totalRows / Math.max(1, n)).toFixed(0)} an epoch (${[...byTable.entries()]
        .sort((x, y) => y[1] - x[1])
        .map(([t, k]) => `${t} ${(k / n).toFixed(0)}`)
        .join(', ')})`,
    );
    log(`  WAL ${(mean((f) => f.walBytes) / 1024).toFixed(0)} KiB an epoch; database growth ${(mean((f) => f.dbBytes) / 1024).toFixed(0)} KiB an epoch`);
    const idleTotal = [...idle.values()].reduce((x, y) => x + y, 0);
    const newlyWritten = [...written].filter((g) => !writtenBefore.has(g)).length;
    log(
      `  idle stacks (${idleStacks.toLocaleString('en-US')}, no sleeve alive, never written): ${idleTotal} rows written for them in ${n} epochs = ${(idleTotal / Math.max(1, idleStacks) / Math.max(1, n)).toFixed(6)} per idle stack per epoch (target 0)${
        idleTotal
          ? `: ${[...idle.entries()]
              .filter(([, k]) => k)
              .map(([t, k]) => `${t} ${k}`)
              .join(', ')}`
          : ''
      }`,
    );
    log(`  stacks that wrote in the window: ${written.size.toLocaleString('en-US')} (${newlyWritten} for the first time)`);
    log(
      `  ticks: ${ticks.map((t) => (t / seconds).toFixed(0)).join(' + ')} /s (expected ${((o.ticking * 1000) / o.tickRateMs).toFixed(0)}), lateness p99 ${lateAll.map((x) => (x === undefined ? '-' : `${(x * 1000).toFixed(0)} ms`)).join(' / ')} against a ${o.tickRateMs} ms period (target below it); leases ${leases.rows.map((r) => `${r.runtime || '(unheld)'} ${r.n}`).join(', ')}`,
    );
    if (warned.size)
      log(
        `  logged (the last 200 kB of each process): ${[...warned.entries()]
          .sort((x, y) => y[1] - x[1])
          .slice(0, 6)
          .map(([k, v]) => `${v} x ${k}`)
          .join('; ')}`,
      );
  } finally {
    if (runtime2 && runtime2.exitCode === null) {
      runtime2.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 3000));
      if (runtime2.exitCode === null) runtime2.kill('SIGKILL');
    }
    await cluster?.stop().catch(() => {});
    await admin.end().catch(() => {});
    await fresh.drop().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(dataDir2, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const o = scaleOptions(process.argv.slice(2));
  console.log(`scale bench (Node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)}): ${JSON.stringify(o)}`);
  await runScaleBench(o);
  process.exit(0);
}
