// Crypto kernel overhead: lib/crypto.ts against the raw node:crypto calls it wraps, same run.
//   npx tsx bench/crypto.ts
// A ratio (lib / raw) near 1 means the wrapper (hex encoding, validation, object shape) is cheap.

import { createCipheriv, createDecipheriv, hkdfSync, randomFillSync } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { EPOCH_KEY_SALT, epochKey, open, randomSecret, seal, utf8 } from '../lib/crypto.ts';

export interface CryptoBenchRow {
  name: string;
  libOpsPerSec: number;
  rawOpsPerSec: number;
  /** libOpsPerSec / rawOpsPerSec */
  ratio: number;
}

export interface CryptoBenchResult {
  payloadBytes: number;
  durationMs: number;
  rows: CryptoBenchRow[];
}

export interface CryptoBenchOptions {
  /** Measured time per operation and side, after warmup. Default 2000 ms. */
  durationMs?: number;
  warmupMs?: number;
  payloadBytes?: number;
}

let sink = 0; // keeps results observable so nothing is optimised away

/** ops/s of fn over durationMs, after warmupMs of the same loop. Checks the clock every batch. */
function opsPerSec(fn: () => number, durationMs: number, warmupMs: number): number {
  const run = (ms: number) => {
    const start = performance.now();
    let ops = 0;
    let now = start;
    while (now - start < ms) {
      for (let i = 0; i < 64; i++) sink ^= fn();
      ops += 64;
      now = performance.now();
    }
    return (ops * 1000) / (now - start);
  };
  run(warmupMs);
  return run(durationMs);
}

export function runCryptoBench(options: CryptoBenchOptions = {}): CryptoBenchResult {
  const durationMs = options.durationMs ?? 2000;
  const warmupMs = options.warmupMs ?? 300;
  const payloadBytes = options.payloadBytes ?? 256;

  const key = randomSecret(32);
  const payload = randomSecret(payloadBytes);
  const master = randomSecret(32);
  const salt = utf8(EPOCH_KEY_SALT);
  const info = utf8('stack-bench\x0012345');

  // Fixtures for the open side.
  const sealed = seal(key, payload);
  const iv = Buffer.from(sealed.iv, 'hex');
  const ctAndTag = Buffer.from(sealed.ct, 'hex');
  const ct = ctAndTag.subarray(0, ctAndTag.length - 16);
  const tag = ctAndTag.subarray(ctAndTag.length - 16);
  const rawIv = new Uint8Array(12);

  let epoch = 0;
  const cases: [string, () => number, () => number][] = [
    [
      `seal ${payloadBytes} B`,
      () => seal(key, payload).ct.length,
      () => {
        randomFillSync(rawIv);
        const c = createCipheriv('aes-256-gcm', key, rawIv);
        const out = c.update(payload);
        c.final();
        return out.length + c.getAuthTag().length;
      },
    ],
    [
      `open ${payloadBytes} B`,
      () => open(key, sealed).length,
      () => {
        const d = createDecipheriv('aes-256-gcm', key, iv);
        d.setAuthTag(tag);
        const out = d.update(ct);
        d.final();
        return out.length;
      },
    ],
    ['epochKey', () => epochKey(master, 'stack-bench', epoch++)[0], () => new Uint8Array(hkdfSync('sha512', master, salt, info, 32))[0]],
  ];

  const rows = cases.map(([name, lib, raw]) => {
    const libOpsPerSec = opsPerSec(lib, durationMs, warmupMs);
    const rawOpsPerSec = opsPerSec(raw, durationMs, warmupMs);
    return { name, libOpsPerSec, rawOpsPerSec, ratio: libOpsPerSec / rawOpsPerSec };
  });
  if (sink === 0.5) console.log(sink); // never true; reads the sink
  return { payloadBytes, durationMs, rows };
}

export function formatCryptoBench(result: CryptoBenchResult): string {
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  const header = ['operation', 'lib ops/s', 'raw ops/s', 'lib/raw'];
  const body = result.rows.map((r) => [r.name, fmt(r.libOpsPerSec), fmt(r.rawOpsPerSec), r.ratio.toFixed(2)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = runCryptoBench();
  console.log(`crypto kernel vs raw node:crypto (${result.durationMs} ms per measurement, Node ${process.version})`);
  console.log(formatCryptoBench(result));
}
