// Readable logs on a terminal: `cog start` under a pseudo-terminal (util-linux `script`) prints
// its start progress (each contract deployed, each service up) and pino-pretty log lines; piped,
// the same logger writes JSON. Ctrl-C through the terminal stops it cleanly. Shift 32400.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { shiftedPortsEnv } from '../bin/up.ts';
import { prettyLogs } from '../lib/log.ts';

const root = path.resolve(import.meta.dirname, '..');
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').replace(/\r/g, '');
const baseEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^VITEST|^NODE_ENV$|^TEST$/.test(k))) as Record<string, string>;

describe('log format', () => {
  it('is pretty on a terminal, JSON elsewhere, and COG_LOG_FORMAT forces either', () => {
    expect(prettyLogs('auto', { isTTY: true })).toBe(true);
    expect(prettyLogs('auto', { isTTY: false })).toBe(false);
    expect(prettyLogs('auto', {})).toBe(false);
    expect(prettyLogs('json', { isTTY: true })).toBe(false);
    expect(prettyLogs('pretty', {})).toBe(true);
  });

  it('writes JSON lines, secrets redacted, when stdout is a pipe', () => {
    const out = execFileSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `import { createLogger } from './lib/log.ts'; createLogger({ name: 'cog' }).info({ identityPriv: 'ab'.repeat(32), service: 'x' }, 'hello');`,
      ],
      { cwd: root, env: baseEnv() },
    ).toString();
    const line = JSON.parse(out.trim());
    expect(line).toMatchObject({ level: 30, name: 'cog', msg: 'hello', service: 'x', identityPriv: '[redacted]' });
  });
});

describe('cog start on a terminal', () => {
  it('shows progress while contracts deploy and services come up, logs pretty, stops on Ctrl-C', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-pretty-'));
    const env = { ...baseEnv(), ...shiftedPortsEnv(32400), COG_DATA_DIR: dataDir, LOG_LEVEL: 'info', TERM: 'xterm' };
    // `script` runs the command through $SHELL; `exec` puts the platform itself on the terminal, so
    // the exit code is its own (dash, as /bin/sh, re-raises a SIGINT its child handled: 130).
    const child = spawn('script', ['-qfec', `exec ${process.execPath} bin/cog.mjs start`, '/dev/null'], {
      cwd: root,
      env: { ...env, SHELL: '/bin/sh' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let raw = '';
    child.stdout.on('data', (d) => (raw += d));
    child.stderr.on('data', (d) => (raw += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    try {
      await expect.poll(() => plain(raw), { timeout: 150_000, interval: 500 }).toMatch(/Cognitive Agent Platform v3 — up in/);
      const out = plain(raw);
      expect(out).toContain('Cognitive Agent Platform v3: starting');
      // The first start deploys the suite: one line per contract, then each service as it is up.
      const deployed = [...out.matchAll(/cortex +deploying \w+ \((\d+)\/(\d+)\)/g)].map((m) => [Number(m[1]), Number(m[2])]);
      const total = deployed[0]?.[1] ?? 0;
      expect(total).toBeGreaterThanOrEqual(7); // the suite (seven spec contracts and any added since)
      expect(deployed).toEqual(Array.from({ length: total }, (_, i) => [i + 1, total]));
      expect(out).toMatch(/cortex +waiting for \d+ deploy transactions to be mined/);
      for (const s of ['cortex', 'medulla', 'hippocampus', 'thalamus', 'gateway'])
        expect(out).toMatch(new RegExp(`\\d+\\.\\d s  ✓ ${s} +http://127\\.0\\.0\\.1:\\d+`));
      // pino-pretty: time, level, name, message; no JSON log lines.
      expect(out).toMatch(/\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(cog\): cortex: suite ready/);
      expect(out.split('\n').filter((l) => l.startsWith('{"level"'))).toEqual([]);
      expect(raw).toMatch(/\x1b\[32mINFO/); // coloured on a terminal
    } finally {
      child.stdin.write('\x03'); // Ctrl-C on the terminal: SIGINT to the platform
      const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000))]);
      if (code === 'hung') child.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
      expect(code).toBe(0);
    }
  }, 200_000);
});
