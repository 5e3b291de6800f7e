// Recall latency on the whole running platform, from outside: `cog start` (what `npm start` runs:
// embedded, with epochs, the worker runner, sleeve ticks and the Cortex outbox all running) in a
// child process on shifted ports, driven over HTTP from this process:
//   A        GET  /v1/stacks/:id/recall?depth=N         (Shape A: Memory nodes, ciphertext)
//   B        POST /v1/recall {stackId, depth}            (Shape B: decrypted fragments)
//   GraphQL  POST /graphql mutation recall(stackId, depth) { fragments { cid text epoch } ... }
// at depth 10, 100 and 1000, against a baseline measured in the same run: the raw decrypt of the
// same nodes (one epochKey per epoch the nodes span, then AES-256-GCM open of each). The platform
// never hands out a stack's secret, so the bench seals the texts recall gave back, under a key of
// its own, in the same epochs and of the same sizes, and times opening them.
//   npx tsx bench/recall.ts [--profile=DIR]
// ratio = recall p50 / raw decrypt p50: what the walk (index reads, payload reads, ledger, drift,
// HTTP, JSON) costs over decryption alone. A recall is timed from its request to its reply's last
// byte; the bench's JSON.parse of the reply (the client runtime's work: 2.4-3.3 ms for Shape A's
// 516 kB at depth 1000) is timed apart, and the last column gives the ratio with it.
// --profile runs the platform under `node --cpu-prof`
// and writes its .cpuprofile into DIR when the platform stops, and beside it the time windows of
// the timed recalls of each depth (recall-windows-<depth>.json): summarise the recalls only, not
// the writes, the sleeve spawns or the stop, with `npx tsx bench/profile-summary.ts
// DIR/CPU.*.cpuprofile 25 --windows=DIR/recall-windows-1000.json`.
// The memory is written through the platform too: pinned remembers (pinned, so the epoch-gating
// window does not hide old nodes from the walk), spread over the epochs the writes take.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { startCluster } from '../test/helpers/cluster.ts';
import { epochKey, fromUtf8, open, seal, type Sealed } from '../lib/crypto.ts';
import { BENCH_LOG_LEVEL, percentile } from './perceive.ts';

/** Port shift of this bench's platform (docs/layout.md: each test or bench has its own). */
export const RECALL_BENCH_SHIFT = 37000;

/** Quiet time after a batch of sleeves is spawned, before the recalls are timed. */
const SETTLE_MS = 2000;
/** The longest the settle waits for the next epoch (the platform's epochs are 4 s by default). */
const SETTLE_EPOCH_TIMEOUT_MS = 30_000;

export type RecallShape = 'A' | 'B' | 'GraphQL';

export interface RecallBenchRow {
  depth: number;
  shape: RecallShape;
  runs: number;
  recallP50Ms: number;
  recallP99Ms: number;
  /** The client's JSON.parse (and check) of a reply, timed apart from the recall. */
  parseP50Ms: number;
  rawDecryptP50Ms: number;
  /** recallP50Ms / rawDecryptP50Ms */
  ratio: number;
  /** (recallP50Ms + parseP50Ms) / rawDecryptP50Ms: the ratio as this bench timed it before session 43. */
  ratioWithParse: number;
}

const r2 = (x: number) => Math.round(x * 1000) / 1000;

async function timeRuns(runs: number, fn: () => Promise<void> | void): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out.sort((a, b) => a - b);
}

async function json<T>(res: Promise<Response>, status = 200): Promise<T> {
  const r = await res;
  const body = (await r.json()) as T;
  if (r.status !== status) throw new Error(`${r.url} answered ${r.status}: ${JSON.stringify(body).slice(0, 300)}`);
  return body;
}

/** A reply read to its last byte, not parsed yet. */
interface Reply {
  status: number;
  url: string;
  body: Buffer;
}

/**
 * A recall's latency ends with the last byte of its reply, as HTTP load tools time a response;
 * parsing the JSON is the client's own work (its runtime's), timed apart.
 */
async function received(res: Promise<Response>): Promise<Reply> {
  const r = await res;
  return { status: r.status, url: r.url, body: Buffer.from(await r.arrayBuffer()) };
}

function parsed<T>(reply: Reply, status = 200): T {
  const body = JSON.parse(reply.body.toString('utf8')) as T;
  if (reply.status !== status) throw new Error(`${reply.url} answered ${reply.status}: ${JSON.stringify(body).slice(0, 300)}`);
  return body;
}

/** Resolves once the platform's epoch has moved past the one current when called. */
async function nextEpoch(gateway: string): Promise<void> {
  const epoch = async () => (await json<{ epoch: number }>(fetch(`${gateway}/v1/epochs/current`))).epoch;
  const from = await epoch();
  const until = Date.now() + SETTLE_EPOCH_TIMEOUT_MS;
  while ((await epoch()) <= from) {
    if (Date.now() > until) throw new Error(`the epoch stayed at ${from} for ${SETTLE_EPOCH_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const post = (url: string, body: unknown) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const GQL_RECALL = 'mutation($s: ID!, $d: Int!) { recall(stackId: $s, depth: $d) { fragments { cid text epoch } brokenCount fidelity } }';

export async function runRecallBench(
  opts: { depths?: number[]; runs?: number[]; profileDir?: string; log?: (s: string) => void } = {},
): Promise<RecallBenchRow[]> {
  const depths = opts.depths ?? [10, 100, 1000];
  // Twenty at depth 1000 (was ten): on a shared 2-core machine one slow recall in ten moved the p50
  // by a fifth (a GC or an epoch's passes inside one run), and the ratio with it.
  const runs = opts.runs ?? [40, 20, 20];
  const log = opts.log ?? (() => {});
  const maxDepth = Math.max(...depths);
  const shapes: RecallShape[] = ['A', 'B', 'GraphQL'];
  // The windows are written before the platform stops and writes its profile: the directory must be there first.
  if (opts.profileDir) fs.mkdirSync(opts.profileDir, { recursive: true });
  // Sampled every 200 µs: the timed recalls of a depth are a few hundred milliseconds in all.
  const nodeArgs = opts.profileDir ? ['--cpu-prof', '--cpu-prof-interval=200', `--cpu-prof-dir=${path.resolve(opts.profileDir)}`] : [];
  const c = await startCluster({
    mode: 'embedded',
    shift: RECALL_BENCH_SHIFT,
    nodeArgs,
    env: { COG_RATE_LIMIT_PER_MIN: '0', LOG_LEVEL: BENCH_LOG_LEVEL },
  });
  try {
    const took = await c.waitHealthy(180_000);
    log(`platform healthy after ${took} ms`);
    const g = c.gateway;
    const stack = await json<{ id: string }>(post(`${g}/v1/stacks`, { name: 'recall-bench' }), 201);
    // Every recall level costs 1 memory token, and a Shape B sleeve starts with 1000: each batch of
    // recalls gets fresh sleeves enough for it, the previous ones decommissioned (their tokens go to
    // the stack's pool), so the stack never has more sleeves alive than one batch needs.
    let alive: string[] = [];
    const sleevesFor = async (memory: number) => {
      for (const id of alive) await json(fetch(`${g}/v1/sleeves/${id}`, { method: 'DELETE' }));
      alive = [];
      for (let i = 0; i < Math.ceil(memory / 1000) + 1; i++) {
        alive.push((await json<{ id: string }>(post(`${g}/v1/sleeves/${stack.id}`, { kind: 'human' }), 201)).id); // Shape B: 1000 memory
      }
    };
    await sleevesFor(maxDepth);
    log(`writing ${maxDepth} pinned memories`);
    const t0 = Date.now();
    // Each write adds 1 drift and a sleeve above COG_DRIFT_MAX (15) is flagged: a sync every 10.
    const syncAll = async () => {
      for (const id of alive) await json(post(`${g}/v1/sleeves/${id}/sync`, {}));
    };
    for (let i = 0; i < maxDepth; i++) {
      if (i % 10 === 0) await syncAll();
      // 500 writes a sleeve (a pinned write costs 1 memory); the sync before a switch means the
      // next writer has seen the head (no shadow branch).
      await json(post(`${g}/v1/sleeves/${alive[Math.floor(i / 500)]}/remember`, { text: `memory ${i} `.repeat(8), pin: true }));
    }
    log(`written in ${Date.now() - t0} ms`);

    type Fragments = Array<{ text?: string; epoch: number }>;
    /** A REST shape's fragments, once its reply holds `depth` of them at fidelity 1. */
    const whole = <F>(shape: 'A' | 'B', depth: number, b: { fragments: F[]; fidelity: number }): F[] => {
      if (b.fragments.length !== depth || b.fidelity !== 1)
        throw new Error(`Shape ${shape} depth ${depth}: ${b.fragments.length} fragments, fidelity ${b.fidelity}`);
      return b.fragments;
    };
    /** Each shape's request (timed to its reply's last byte) and the check of its parsed reply. */
    const calls = new Map<RecallShape, { send: (depth: number) => Promise<Reply>; check: (depth: number, reply: Reply) => Fragments }>([
      [
        'A',
        {
          send: (depth) => received(fetch(`${g}/v1/stacks/${stack.id}/recall?depth=${depth}`)),
          check: (depth, reply) => whole('A', depth, parsed<{ fragments: Array<{ epoch: number; ciphertext: unknown }>; fidelity: number }>(reply)),
        },
      ],
      [
        'B',
        {
          send: (depth) => received(post(`${g}/v1/recall`, { stackId: stack.id, depth })),
          check: (depth, reply) => whole('B', depth, parsed<{ fragments: Array<{ text: string; epoch: number }>; fidelity: number }>(reply)),
        },
      ],
      [
        'GraphQL',
        {
          send: (depth) => received(post(`${g}/graphql`, { query: GQL_RECALL, variables: { s: stack.id, d: depth } })),
          check: (depth, reply) => {
            const b = parsed<{ data?: { recall: { fragments: Array<{ text: string; epoch: number }>; fidelity: number } }; errors?: unknown }>(reply);
            const r = b.data?.recall;
            if (!r || b.errors || r.fragments.length !== depth || r.fidelity !== 1)
              throw new Error(`GraphQL depth ${depth}: ${JSON.stringify(b).slice(0, 300)}`);
            return r.fragments;
          },
        },
      ],
    ]);
    const recallOnce = async (shape: RecallShape, depth: number) => {
      const call = calls.get(shape)!;
      return call.check(depth, await call.send(depth));
    };
    const shapeB = (depth: number) => recallOnce('B', depth);

    const rows: RecallBenchRow[] = [];
    const tRecall = Date.now();
    const secret = randomBytes(32);
    for (const [i, depth] of depths.entries()) {
      // The timed recalls' windows on the monotonic clock (the profile's), for profile-summary --windows.
      const windows: Array<[number, number]> = [];
      await sleevesFor(depth * (1 + shapes.length * (runs[i]! + 1)));
      // The spawns' aftermath (the sleeve runtime leasing and starting each new sleeve, releasing the
      // old ones; at the next epoch boundary the settlement of their mints and returns, the events'
      // relay) settles before anything is timed: it is the bench's setup, not a recall's cost. With
      // only a fixed 2 s the boundary fell inside the first shape's recalls about every other run
      // (Shape A at depth 1000: 29 ms with 2 s, 17-19 ms after the boundary, on a slow machine).
      await nextEpoch(g);
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      // The baseline's nodes: the texts and epochs of the walk, sealed as perceive seals them.
      const fragments = await shapeB(depth);
      const byEpoch = new Map<number, Sealed[]>();
      for (const f of fragments) {
        const k = epochKey(secret, stack.id, f.epoch);
        byEpoch.set(f.epoch, [...(byEpoch.get(f.epoch) ?? []), seal(k, f.text!)]);
      }
      const decrypt = () => {
        for (const [epoch, nodes] of byEpoch) {
          const k = epochKey(secret, stack.id, epoch);
          for (const n of nodes) fromUtf8(open(k, n));
        }
      };
      for (const shape of shapes) {
        await syncAll(); // a recall adds 0.1 drift to its payer
        await recallOnce(shape, depth); // warm
        decrypt();
        // Each recall is followed by the check of its reply (the client's JSON.parse, timed apart)
        // and a raw decrypt of the same nodes: on a shared, loaded machine both then see the same
        // load, and the ratio of the two p50s is what counts.
        const call = calls.get(shape)!;
        const rec: number[] = [];
        const parse: number[] = [];
        const raw: number[] = [];
        for (let r = 0; r < runs[i]!; r++) {
          const start = process.hrtime.bigint() / 1000n;
          let reply: Reply | undefined;
          rec.push(...(await timeRuns(1, async () => void (reply = await call.send(depth)))));
          windows.push([Number(start), Number(process.hrtime.bigint() / 1000n)]);
          parse.push(...(await timeRuns(1, () => void call.check(depth, reply!))));
          raw.push(...(await timeRuns(1, decrypt)));
        }
        rec.sort((a, b) => a - b);
        parse.sort((a, b) => a - b);
        raw.sort((a, b) => a - b);
        const rawP50 = percentile(raw, 0.5);
        const p50 = percentile(rec, 0.5);
        const parseP50 = percentile(parse, 0.5);
        rows.push({
          depth,
          shape,
          runs: runs[i]!,
          recallP50Ms: r2(p50),
          recallP99Ms: r2(percentile(rec, 0.99)),
          parseP50Ms: r2(parseP50),
          rawDecryptP50Ms: r2(rawP50),
          ratio: Math.round((p50 / rawP50) * 10) / 10,
          ratioWithParse: Math.round(((p50 + parseP50) / rawP50) * 10) / 10,
        });
        log(`depth ${depth} ${shape}: p50 ${r2(p50)} ms, its JSON.parse ${r2(parseP50)} ms (raw ${r2(rawP50)} ms, ${byEpoch.size} epochs)`);
      }
      if (opts.profileDir) fs.writeFileSync(path.join(opts.profileDir, `recall-windows-${depth}.json`), JSON.stringify(windows));
    }
    log(`recall phase: ${((Date.now() - tRecall) / 1000).toFixed(1)} s (the profile's last seconds, before the stop)`);
    return rows;
  } finally {
    await c.stop();
  }
}

export function formatRecallBench(rows: RecallBenchRow[]): string {
  return [
    'depth  shape     recall p50   recall p99   client parse p50   raw decrypt p50   ratio   with parse',
    ...rows.map(
      (r) =>
        `${String(r.depth).padStart(5)}  ${r.shape.padEnd(7)} ${String(r.recallP50Ms).padStart(9)} ms ${String(r.recallP99Ms).padStart(9)} ms ${String(r.parseP50Ms).padStart(14)} ms ${String(r.rawDecryptP50Ms).padStart(13)} ms ${String(r.ratio).padStart(7)} ${String(r.ratioWithParse).padStart(12)}`,
    ),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const profileDir = process.argv.find((a) => a.startsWith('--profile='))?.slice('--profile='.length);
  const rows = await runRecallBench({ profileDir, log: (s) => console.error(`recall bench: ${s}`) });
  console.log(`recall on the running platform (cog start, embedded) over HTTP vs raw decrypt of the same nodes (Node ${process.version})`);
  console.log(formatRecallBench(rows));
}
