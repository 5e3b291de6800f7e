// `npm start` end to end: every service on its port, a clean stop, state across a restart, and a
// port already in use stopping the start with a message naming it. Ports are shifted (+20000) so
// the test does not collide with a platform a developer is running.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';

const root = path.resolve(import.meta.dirname, '../..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-start-'));
const shift = 20000;
const ports = {
  GATEWAY_PORT: 7070,
  NEEDLECAST_PORT: 7071,
  THALAMUS_PORT: 7072,
  DHF_PORT: 7073,
  TREASURY_PORT: 7074,
  FAUCET_PORT: 7075,
  MEDULLA_PORT: 8332,
  HIPPOCAMPUS_PORT: 5001,
  CORTEX_PORT: 8545,
};
// The child gets this process's environment without what vitest/vite add to it.
const inherited = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !['BASE_URL', 'MODE', 'DEV', 'PROD', 'SSR', 'VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'TEST'].includes(k)),
) as Record<string, string>;
const env: Record<string, string> = { ...inherited, COG_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
for (const [k, v] of Object.entries(ports)) env[k] = String(v + shift);
const url = (k: keyof typeof ports) => `http://127.0.0.1:${ports[k] + shift}`;

let child: ChildProcess | undefined;

/** The first `n` epochAdvanced events of a subscription (optionally resumed after a cursor). */
async function epochEvents(n: number, after?: string): Promise<{ cursor: string; epoch: number }[]> {
  const client = createClient({ url: `ws://127.0.0.1:${ports.GATEWAY_PORT + shift}/graphql`, webSocketImpl: WebSocket, retryAttempts: 0 });
  const got: { cursor: string; epoch: number }[] = [];
  await new Promise<void>((resolve, reject) => {
    const stop = client.subscribe<{ epochAdvanced: { cursor: string; epoch: number } }>(
      { query: `subscription { epochAdvanced${after ? `(after: "${after}")` : ''} { cursor epoch } }` },
      {
        next: (v) => {
          got.push(v.data!.epochAdvanced);
          if (got.length === n) {
            stop();
            resolve();
          }
        },
        error: reject,
        complete: () => resolve(),
      },
    );
  });
  await client.dispose();
  return got;
}
let lastEvent: { cursor: string; epoch: number } | undefined;
let output = '';

function start(extra: Record<string, string> = {}): ChildProcess {
  output = '';
  const c = spawn(process.execPath, [path.join(root, 'bin', 'cog.mjs'), 'start'], { cwd: root, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
  c.stdout!.on('data', (d) => (output += d));
  c.stderr!.on('data', (d) => (output += d));
  return c;
}

async function healthy(timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (child && child.exitCode !== null) throw new Error(`the platform exited with ${child.exitCode}:\n${output.slice(-3000)}`);
    try {
      const r = await fetch(`${url('GATEWAY_PORT')}/healthz`);
      if (r.ok) return Date.now() - t0;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`not healthy after ${timeoutMs} ms:\n${output.slice(-3000)}`);
}

const stop = (c: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    c.once('exit', (code) => resolve(code));
    c.kill('SIGTERM');
  });

afterAll(async () => {
  if (child && child.exitCode === null) await stop(child);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start', () => {
  let stackId = '';

  it('boots every service on its port and prints a banner', async () => {
    child = start();
    await healthy(120_000);
    await expect.poll(() => output, { timeout: 30_000 }).toContain('Cognitive Agent Platform');
    for (const k of [
      'GATEWAY_PORT',
      'NEEDLECAST_PORT',
      'THALAMUS_PORT',
      'DHF_PORT',
      'TREASURY_PORT',
      'FAUCET_PORT',
      'MEDULLA_PORT',
      'HIPPOCAMPUS_PORT',
    ] as const) {
      const r = await fetch(`${url(k)}/health`);
      expect(r.status, k).toBeLessThan(500);
    }
    const rpc = await fetch(url('CORTEX_PORT'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    });
    expect(((await rpc.json()) as { result: string }).result).toBe('0x20000');
    const created = await fetch(`${url('GATEWAY_PORT')}/v1/stacks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'persisted' }),
    });
    expect(created.status).toBe(201);
    stackId = ((await created.json()) as { id: string }).id;
    // A live subscription sees Medulla's epochs; remember the last cursor for after the restart.
    const events = await epochEvents(1);
    expect(events[0].epoch).toBeGreaterThanOrEqual(0);
    lastEvent = events[0];
  }, 180_000);

  it('a port already in use stops a second start with a message naming it', async () => {
    const otherDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-start2-'));
    const second = start({ COG_DATA_DIR: otherDir });
    const code = await new Promise<number | null>((resolve) => second.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toMatch(/port \d+ is already in use/);
    fs.rmSync(otherDir, { recursive: true, force: true });
  }, 120_000);

  it('a second start on a data dir in use is refused', async () => {
    const second = start({ GATEWAY_PORT: '0' });
    const code = await new Promise<number | null>((resolve) => second.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toMatch(/data dir .* is in use/);
  }, 120_000);

  it('stops cleanly on SIGTERM and comes back with the same state', async () => {
    expect(await stop(child!)).toBe(0);
    child = start();
    // How fast is a benchmark's business (README: start-up times), not an assertion here.
    await healthy(90_000);
    const r = await fetch(`${url('GATEWAY_PORT')}/v1/stacks/${encodeURIComponent(stackId)}`);
    expect(r.status).toBe(200);
    expect(((await r.json()) as { name: string }).name).toBe('persisted');
    // Resuming after the cursor seen before the restart replays what followed it, without a gap.
    const resumed = await epochEvents(2, lastEvent!.cursor);
    expect(Number(resumed[0].cursor)).toBeGreaterThan(Number(lastEvent!.cursor));
    expect(resumed[0].epoch).toBeLessThanOrEqual(lastEvent!.epoch + 1);
    expect(resumed.map((e) => e.epoch)).toContain(lastEvent!.epoch + 1);
  }, 120_000);
});
