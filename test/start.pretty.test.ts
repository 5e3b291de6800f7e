// Readable logs on a terminal: `cog start` under a pseudo-terminal (util-linux `script`) prints
// its start progress (each contract deployed, each service up) and pino-pretty log lines; piped,
// the same logger writes JSON, a block of lines a write. Ctrl-C through the terminal stops it
// cleanly. Shift 32400.
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

  it('writes piped lines in blocks, a lone line within the flush period, and what is left when the process exits', async () => {
    // 400 lines a millisecond apart (a request each, as under load), then a lone line
    // while the process idles, then 20 lines and process.exit at once.
    // The child counts its writes to stdout (sonic-boom writes through fs.write) and reports them on stderr.
    const script = `import fs from 'node:fs';
      import { createLogger } from './lib/log.ts';
      let writes = 0;
      const write = fs.write;
      fs.write = (fd, ...rest) => { if (fd === 1) writes++; return write(fd, ...rest); };
      process.on('exit', () => process.stderr.write('writes ' + writes));
      const log = createLogger({ name: 'cog' });
      for (let i = 0; i < 400; i++) { log.info({ i }, 'request'); await new Promise((r) => setTimeout(r, 0)); }
      await new Promise((r) => setTimeout(r, 300));
      log.info({ lone: true, at: Date.now() }, 'lone');
      await new Promise((r) => setTimeout(r, 1500));
      for (let i = 0; i < 20; i++) log.info({ last: i }, 'last');
      process.exit(0);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, env: baseEnv() });
    const chunks: Array<{ at: number; text: string }> = [];
    child.stdout.on('data', (d: Buffer) => chunks.push({ at: Date.now(), text: d.toString() }));
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    const lines = chunks
      .map((c) => c.text)
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i?: number; lone?: boolean; at?: number; last?: number });
    expect(lines.filter((l) => l.i !== undefined).map((l) => l.i)).toEqual([...Array(400).keys()]);
    expect(lines.filter((l) => l.last !== undefined).map((l) => l.last)).toEqual([...Array(20).keys()]);
    // A write a line would be about 420 writes; in blocks of 4 kB (about 50 lines) and the 200 ms
    // flushes, a dozen or so.
    const writes = Number(/writes (\d+)/.exec(err)?.[1]);
    expect(writes).toBeGreaterThan(0);
    expect(writes, `${writes} writes to stdout`).toBeLessThan(60);
    // The lone line came out by the periodic flush, long before the process ended.
    const lone = lines.find((l) => l.lone)!;
    const loneChunk = chunks.find((c) => c.text.includes('"msg":"lone"'))!;
    expect(loneChunk.at - lone.at!).toBeLessThan(1000);
  }, 60_000);
});

describe('piped log lines', () => {
  it('stop, and the process goes on, when the reader of stdout goes away', async () => {
    const script = `import { createLogger } from './lib/log.ts';
      const log = createLogger({ name: 'cog' });
      let n = 0;
      const t = setInterval(() => { for (let k = 0; k < 200; k++) log.info({ n: n++, pad: 'x'.repeat(100) }, 'line'); }, 10);
      setTimeout(() => { clearInterval(t); process.stderr.write('alive after ' + n); process.exit(0); }, 1500);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, env: baseEnv() });
    let got = 0;
    // The first block read, the pipe is closed: the child's next writes fail with EPIPE.
    child.stdout.once('data', (d: Buffer) => {
      got = d.length;
      child.stdout.destroy();
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(got).toBeGreaterThan(0);
    expect(err).toMatch(/alive after \d+/);
    expect(code).toBe(0);
  }, 60_000);
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
