// The subject matcher and the publish-subject check, against the definitions they replaced (split on
// '.', token by token): every filter over every subject of a small alphabet, so a wildcard at any
// place, a token of any length, an empty token and a subject shorter or longer than the filter all
// come up.
import { describe, expect, it } from 'vitest';
import { assertPublishSubject } from './common.ts';
import { subjectMatches } from './port.ts';

function reference(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (f[i] !== '*' && f[i] !== s[i]) return false;
  }
  return f.length === s.length;
}

/** Every dotted name of 1 to `max` tokens over `tokens`. */
function names(tokens: readonly string[], max: number): string[] {
  let level = [...tokens];
  const out = [...level];
  for (let n = 2; n <= max; n++) {
    level = level.flatMap((a) => tokens.map((t) => `${a}.${t}`));
    out.push(...level);
  }
  return out;
}

describe('subjectMatches', () => {
  it('agrees with the token-by-token definition on every filter and subject of a small alphabet', () => {
    const subjects = names(['cog', 'a', 'ab', 'b', ''], 4);
    const filters = names(['cog', 'a', 'ab', '*', '>'], 4).filter((f) => !f.split('.').slice(0, -1).includes('>'));
    let matched = 0;
    for (const f of filters) {
      for (const s of subjects) {
        const want = reference(f, s);
        if (subjectMatches(f, s) !== want) throw new Error(`subjectMatches(${JSON.stringify(f)}, ${JSON.stringify(s)}) should be ${want}`);
        if (want) matched++;
      }
    }
    expect(matched).toBeGreaterThan(1000); // both outcomes are well covered
    expect(filters.length * subjects.length - matched).toBeGreaterThan(1000);
  });

  it('matches the platform subjects as NATS does', () => {
    expect(subjectMatches('cog.perceive.>', 'cog.perceive.stack:1')).toBe(true);
    expect(subjectMatches('cog.perceive.>', 'cog.perceive')).toBe(false);
    expect(subjectMatches('cog.*.stack:1', 'cog.perceive.stack:1')).toBe(true);
    expect(subjectMatches('cog.*', 'cog.perceive.stack:1')).toBe(false);
    expect(subjectMatches('>', 'cog.epoch.advanced')).toBe(true);
    expect(subjectMatches('cog.epoch.advanced', 'cog.epoch.advanced')).toBe(true);
    expect(subjectMatches('cog.epoch.advanced', 'cog.epoch.advance')).toBe(false);
    expect(subjectMatches('cog.epoch.advance', 'cog.epoch.advanced')).toBe(false);
  });
});

describe('assertPublishSubject', () => {
  it('takes cog.<token>... and refuses wildcards, whitespace, empty tokens and other roots', () => {
    for (const ok of ['cog.a', 'cog.perceive.stack:9f', 'cog.sleeve.spawned.sleeve:x-1']) expect(() => assertPublishSubject(ok)).not.toThrow();
    for (const bad of ['cog', 'cog.', 'cog..a', 'cog.a.', 'cog.*', 'cog.a.>', 'cog.a b', 'x.a', 'cogs.a', '.cog.a', '', 7 as never, null as never]) {
      expect(() => assertPublishSubject(bad), String(bad)).toThrow(/invalid bus subject/);
    }
  });
});
