// The client side a developer touches, against a started platform with COG_AUTH=required (shift
// 32200, one platform for the file): the `cog` client commands (tables, --json, --help, exit
// codes, errors that say what to do) and every TypeScript example in examples/.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './helpers/cluster.ts';

const root = path.resolve(import.meta.dirname, '..');
let cluster: Cluster;
let env: Record<string, string>;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function cog(args: string[], extra: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(root, 'bin/cog.mjs'), ...args], { cwd: root, env: { ...env, ...extra }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 99) : 0, stdout, stderr });
    });
  });
}
const json = (r: Run) => {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};

beforeAll(async () => {
  cluster = await startCluster({ mode: 'embedded', shift: 32200, env: { COG_AUTH: 'required' } });
  await cluster.waitHealthy(120_000);
  const ports = Object.fromEntries(Object.entries(cluster.env).filter(([k]) => /_PORT$/.test(k)));
  env = {
    ...(Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !['VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'NODE_ENV', 'TEST'].includes(k)),
    ) as Record<string, string>),
    ...ports,
    COG_URL: cluster.gateway,
    COG_KEYS_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'cog-keys-')),
  };
}, 180_000);

afterAll(async () => {
  if (env?.COG_KEYS_DIR) fs.rmSync(env.COG_KEYS_DIR, { recursive: true, force: true });
  await cluster?.stop();
});

// Each command is its own process (tsx start-up): a few seconds each on a loaded machine.
const CLI_MS = 150_000;

describe('cog client commands', () => {
  let stackId: string;
  let ai: string;

  it(
    'stack create keeps the key (0600) and makes the stack the default; stack show reads it',
    async () => {
      const created = json(await cog(['stack', 'create', 'cli', 'agent', '--kind', 'ai', '--json']));
      stackId = created.stack.id;
      expect(stackId).toMatch(/^stack:ai:/);
      expect(created.stack.name).toBe('cli agent');
      const stat = fs.statSync(created.keyFile);
      expect(stat.mode & 0o777).toBe(0o600);
      expect(JSON.parse(fs.readFileSync(created.keyFile, 'utf8'))).toEqual({ stackId, identityPriv: created.identityPriv });
      const shown = await cog(['stack', 'show']);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(stackId);
      expect(shown.stdout).toContain('no sleeves yet');
    },
    CLI_MS,
  );

  it(
    'sleeve spawn|list|rm, perceive, remember, recall: signed with the kept key, tables and JSON',
    async () => {
      ai = json(await cog(['sleeve', 'spawn', 'ai', '--json'])).id;
      const human = json(await cog(['sleeve', 'spawn', 'human', '--hostname', 'desk', '--json']));
      expect(human.hostname).toBe('desk');
      const list = await cog(['sleeve', 'list']);
      expect(list.stdout.split('\n')[0]).toMatch(/^SLEEVE\s+KIND\s+STATE\s+DRIFT/);
      expect(list.stdout).toContain(ai);
      const p = await cog(['perceive', ai, 'the', 'sea', 'is', 'calm']);
      expect(p.code, p.stderr).toBe(0);
      expect(p.stdout).toMatch(/cid\s+cog:\/\//);
      const r = json(await cog(['remember', 'my name is Ada', '--pin', '--json']));
      expect(r.node.pinned).toBe(true);
      const recall = await cog(['recall', '--depth', '5']);
      expect(recall.code, recall.stderr).toBe(0);
      expect(recall.stdout).toContain('the sea is calm');
      expect(recall.stdout).toContain('my name is Ada');
      expect(recall.stdout).toMatch(/fidelity 1/);
      const rm = json(await cog(['sleeve', 'rm', human.id, '--json']));
      expect(rm.alive).toBe(false);
      expect(json(await cog(['faucet', '--json'])).granted.routing).toBe(100);
    },
    CLI_MS,
  );

  it(
    'watch prints live events; needlecast prints a line per saga step',
    async () => {
      const watcher = spawn(process.execPath, [path.join(root, 'bin/cog.mjs'), 'watch', 'perceived', '--json', '--count', '1'], { cwd: root, env });
      let seen = '';
      watcher.stdout.on('data', (d) => (seen += d));
      let ready = '';
      watcher.stderr.on('data', (d) => (ready += d));
      const exited = new Promise<number>((r) => watcher.on('exit', (c) => r(c ?? 99)));
      await new Promise((r) => setTimeout(r, 4000)); // tsx start and the subscription
      const cid = json(await cog(['perceive', ai, 'watched', '--json'])).cid;
      expect(await exited, ready).toBe(0);
      expect(JSON.parse(seen.trim())).toMatchObject({ cid, stackId, sleeveId: ai, cursor: expect.stringMatching(/^\d+$/) });

      const nc = await cog(['needlecast', ai, 'memory']);
      expect(nc.code, nc.stderr).toBe(0);
      const lines = nc.stdout.trim().split('\n');
      for (const step of ['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle'])
        expect(
          lines.some((l) => new RegExp(`s  ${step}\\s+done$`).test(l)),
          nc.stdout,
        ).toBe(true);
      expect(lines.at(-1)).toMatch(/^completed: now on sleeve:memory:/);
    },
    CLI_MS,
  );

  it(
    'status shows every service, the epoch and the tip age',
    async () => {
      const s = json(await cog(['status', '--json']));
      expect(s.ok).toBe(true);
      expect(s.services.map((x: { name: string }) => x.name)).toEqual(expect.arrayContaining(['gateway', 'medulla', 'hippocampus', 'needlecast']));
      expect(s.services.every((x: { ok: boolean }) => x.ok)).toBe(true);
      expect(s.epoch).toBeGreaterThanOrEqual(0);
      expect(s.tipAgeSeconds).toBeGreaterThanOrEqual(0);
      const table = await cog(['status']);
      expect(table.stdout).toMatch(/^SERVICE\s+STATE\s+URL/);
      expect(table.stdout).toMatch(/tip age \d+\.\d s/);
    },
    CLI_MS,
  );

  it(
    'exit codes mean something and errors say what to do',
    async () => {
      const missing = await cog(['perceive', 'sleeve:ai:999999:deadbeef', 'x']);
      expect(missing.code).toBe(3);
      expect(missing.stderr).toContain('NOT_FOUND');
      const bad = await cog(['recall', '--depth', '0']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/depth must be from 1 to 10000 \[INVALID_INPUT/);
      const usage = await cog(['sleeve', 'spawn']);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toContain('missing <kind>');
      const wrongKey = await cog(['faucet', '--key', '11'.repeat(32)]);
      expect(wrongKey.code).toBe(4);
      expect(wrongKey.stderr).toMatch(/UNAUTHORIZED[\s\S]*--key/);
      const jsonErr = await cog(['faucet', '--key', '11'.repeat(32), '--json']);
      expect(JSON.parse(jsonErr.stderr.trim()).error).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
      const down = await cog(['status', '--url', 'http://127.0.0.1:9']);
      expect(down.code).toBe(5);
      expect(down.stderr).toContain('npm start');
      const help = await cog(['needlecast', '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('usage: cog needlecast <fromSleeveId>');
      expect(help.stdout).toContain('Exit codes');
    },
    CLI_MS,
  );
});

describe('examples/', () => {
  const examples = fs
    .readdirSync(path.join(root, 'examples'))
    .filter((f) => f.endsWith('.ts'))
    .sort();

  it('has examples', () => expect(examples).toEqual(expect.arrayContaining(['first-agent.ts', 'own-key.ts', 'watch-events.ts'])));

  for (const file of examples) {
    it(`${file} runs against the signed platform`, async () => {
      const r = await new Promise<Run>((resolve) => {
        execFile(process.execPath, ['--import', 'tsx', path.join(root, 'examples', file)], { cwd: root, env, timeout: 90_000 }, (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 99) : 0, stdout, stderr }),
        );
      });
      expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/stack stack:/);
    }, 120_000);
  }
});
