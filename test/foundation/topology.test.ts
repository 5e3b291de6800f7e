import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import { parse } from 'yaml';
import { topology } from '../../bin/up.ts';
import { SERVICES } from '../../bin/services.ts';
import { loadConfig } from '../../lib/config.ts';

const procfile = fs.readFileSync(new URL('../../deploy/Procfile', import.meta.url), 'utf8')
  .split('\n').filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => {
    const [, cmd] = l.split(/:(.*)/s);
    const env = Object.fromEntries([...cmd.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1], m[2]]));
    return { service: cmd.trim().split('service ')[1].trim(), env };
  });

describe('deploy/ files are true to bin/up.ts', () => {
  const specs = topology(loadConfig({}));
  it('the Procfile runs the same processes with the same settings', () => {
    expect(procfile.map((p) => p.service)).toEqual(specs.map((s) => s.service));
    specs.forEach((s, i) => expect(procfile[i].env).toEqual(s.env));
  });
  it('compose.yaml has one service per process', () => {
    const doc = parse(fs.readFileSync(new URL('../../deploy/compose.yaml', import.meta.url), 'utf8')) as { services: Record<string, { command?: string[] }> };
    const commands = Object.values(doc.services).filter((s) => s.command?.[0] === 'node').map((s) => s.command![3]);
    expect(commands).toEqual(specs.map((s) => s.service));
  });
  it('every process names a registered service', () => {
    for (const s of specs) expect(SERVICES.map((x) => x.name)).toContain(s.service);
  });
});
