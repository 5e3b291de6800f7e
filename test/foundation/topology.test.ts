import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import { parse } from 'yaml';
import { PLATFORM_NODE_FLAGS } from '../../bin/node-flags.ts';
import { topology } from '../../bin/up.ts';
import { runsTableCare, SERVICES } from '../../bin/services.ts';
import { loadConfig } from '../../lib/config.ts';

const procfile = fs
  .readFileSync(new URL('../../deploy/Procfile', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => {
    const [, cmd] = l.split(/:(.*)/s);
    const [vars, run] = cmd.split(/ node /);
    const env = Object.fromEntries([...vars.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1], m[2]]));
    const args = run.trim().split(/\s+/);
    return { service: args.at(-1), flags: args.slice(0, args.indexOf('bin/cog.mjs')), env };
  });

describe('deploy/ files are true to bin/up.ts', () => {
  const specs = topology(loadConfig({}));
  it('the Procfile runs the same processes with the same settings', () => {
    expect(procfile.map((p) => p.service)).toEqual(specs.map((s) => s.service));
    specs.forEach((s, i) => expect(procfile[i].env).toEqual(s.env));
    for (const p of procfile) expect(p.flags, p.service).toEqual(PLATFORM_NODE_FLAGS);
  });
  it('compose.yaml has one service per process, with the same settings', () => {
    const doc = parse(fs.readFileSync(new URL('../../deploy/compose.yaml', import.meta.url), 'utf8'), { merge: true }) as {
      services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
    };
    const cog = Object.values(doc.services).filter((s) => s.command?.[0] === 'node');
    expect(cog.map((s) => s.command!.at(-1))).toEqual(specs.map((s) => s.service));
    for (const s of cog) expect(s.command!.slice(1, s.command!.indexOf('bin/cog.mjs'))).toEqual(PLATFORM_NODE_FLAGS);
    const shared = ['DATABASE_URL', 'NATS_URL', 'REDIS_URL', 'S3_ENDPOINT', 'S3_BUCKET', 'COG_MASTER_KEY', 'COG_INTERNAL_TOKEN'];
    cog.forEach((s, i) => {
      const own = Object.fromEntries(Object.entries(s.environment ?? {}).filter(([k]) => !shared.includes(k)));
      expect(own, specs[i]!.name).toEqual(specs[i]!.env);
    });
  });
  it('every process has a PostgreSQL pool, and together they fit a stock server (max_connections 100)', () => {
    const total = specs.reduce((n, s) => n + Number(s.env.DATABASE_POOL_SIZE), 0);
    for (const s of specs) expect(Number(s.env.DATABASE_POOL_SIZE), s.name).toBeGreaterThanOrEqual(2);
    expect(total).toBeLessThanOrEqual(80);
  });
  it('npm start runs the platform with the same node flags as cog up runs each service', () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe(`node ${PLATFORM_NODE_FLAGS.join(' ')} bin/cog.mjs start`);
    expect(PLATFORM_NODE_FLAGS).toContain('--max-semi-space-size=64');
  });
  it('table care runs in the worker processes only (PGlite: in its one process)', () => {
    expect(specs.filter((s) => runsTableCare('postgres', [s.service])).map((s) => s.name)).toEqual(['worker-1', 'worker-2']);
    expect(
      runsTableCare(
        'postgres',
        SERVICES.map((s) => s.name),
      ),
    ).toBe(true); // cog start: every service in one process
    expect(runsTableCare('pglite', ['gateway'])).toBe(true);
  });
  it('every process names a registered service', () => {
    for (const s of specs) expect(SERVICES.map((x) => x.name)).toContain(s.service);
  });
});
