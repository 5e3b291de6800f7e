// Miner throughput: hashes/s of Medulla's miner (worker thread, full speed) against raw node:crypto
// SHA-256d over the same 244-byte header in a tight loop, same machine, same run. Target ratio >= 0.8.
// Also the CPU each costs a hash, the whole process's (process.cpuUsage: V8's helper threads that
// sweep the Buffers node:crypto's one-shot hash allocates included).
//   npx tsx bench/miner.ts
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { genesisBlock } from '../subgraphs/chains/medulla/chain.ts';
import { encodeHeader } from '../subgraphs/chains/medulla/header.ts';
import { Miner } from '../subgraphs/chains/medulla/miner.ts';

export interface MinerBenchResult {
  durationMs: number;
  rawSha256PerSec: number;
  rawSha256dPerSec: number;
  minerHashesPerSec: number;
  /** minerHashesPerSec / rawSha256dPerSec (one miner hash is one SHA-256d). */
  ratio: number;
  /** CPU of the whole process per hash, microseconds: the raw SHA-256d loop, the miner. */
  rawCpuUsPerHash: number;
  minerCpuUsPerHash: number;
}

// The raw loop runs in a worker too, so both sides pay the same thread placement.
const RAW = `
const { parentPort, workerData } = require('node:worker_threads');
const { hash } = require('node:crypto');
const buf = Buffer.from(workerData.header);
const run = (ms, double) => { let n = 0; const t = performance.now(); let now = t;
  while (now - t < ms) { for (let i = 0; i < 1024; i++) { buf.writeUInt32BE(n >>> 0, 240);
    double ? hash('sha256', hash('sha256', buf, 'buffer'), 'buffer') : hash('sha256', buf, 'buffer'); n++; } now = performance.now(); }
  return { perSec: n * 1000 / (now - t), n }; };
run(workerData.warm, true);
const single = run(workerData.ms, false).perSec;
parentPort.postMessage({ type: 'single', single });
parentPort.once('message', () => { const d = run(workerData.ms, true); parentPort.postMessage({ type: 'double', double: d.perSec, n: d.n }); });`;

/** CPU of this process, microseconds (every thread). */
const cpuUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

function raw(header: Buffer, ms: number, warm: number): Promise<{ single: number; double: number; cpuUsPerHash: number }> {
  return new Promise((resolve, reject) => {
    const w = new Worker(RAW, { eval: true, workerData: { header, ms, warm } });
    let single = 0;
    let c0 = 0;
    w.on('message', (m: { type: string; single: number; double: number; n: number }) => {
      if (m.type === 'single') {
        single = m.single;
        c0 = cpuUs();
        w.postMessage('double');
        return;
      }
      const cpuUsPerHash = (cpuUs() - c0) / m.n;
      void w.terminate().then(() => resolve({ single, double: m.double, cpuUsPerHash }));
    });
    w.once('error', reject);
  });
}

export async function runMinerBench(opts: { durationMs?: number; warmupMs?: number } = {}): Promise<MinerBenchResult> {
  const durationMs = opts.durationMs ?? 2000;
  const warmupMs = opts.warmupMs ?? 300;
  const header = genesisBlock(1);
  const r = await raw(encodeHeader(header), durationMs, warmupMs);
  const miner = new Miner({ duty: 1, sliceMs: 20 });
  await miner.measure(header, warmupMs);
  const c0 = cpuUs();
  const m = await miner.measure(header, durationMs);
  const minerCpuUsPerHash = (cpuUs() - c0) / m.hashes;
  await miner.close();
  const minerHashesPerSec = (m.hashes * 1000) / m.elapsedMs;
  return {
    durationMs,
    rawSha256PerSec: r.single,
    rawSha256dPerSec: r.double,
    minerHashesPerSec,
    ratio: minerHashesPerSec / r.double,
    rawCpuUsPerHash: r.cpuUsPerHash,
    minerCpuUsPerHash,
  };
}

export function formatMinerBench(x: MinerBenchResult): string {
  const f = (n: number) => Math.round(n).toLocaleString('en-US').padStart(12);
  return [
    'Medulla miner vs raw node:crypto (244-byte header, one core each)',
    `  raw SHA-256            ${f(x.rawSha256PerSec)} /s`,
    `  raw SHA-256d           ${f(x.rawSha256dPerSec)} /s`,
    `  miner (SHA-256d)       ${f(x.minerHashesPerSec)} /s`,
    `  ratio miner / raw d    ${x.ratio.toFixed(3).padStart(12)}   (target >= 0.8)`,
    `  CPU a hash, raw d      ${x.rawCpuUsPerHash.toFixed(2).padStart(12)} us (the process, every thread)`,
    `  CPU a hash, miner      ${x.minerCpuUsPerHash.toFixed(2).padStart(12)} us`,
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(formatMinerBench(await runMinerBench()));
}
