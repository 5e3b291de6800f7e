import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, scrubSecrets, SECRET_KEYS } from './log.ts';

describe('scrubSecrets', () => {
  it('redacts every secret key at any depth up to four and in arrays, copying only what it changes', () => {
    const clean = { method: 'POST', path: '/v1/perceive', status: 200, nested: { a: [1, { b: 2 }] } };
    expect(scrubSecrets(clean)).toBe(clean);
    const dirty = { masterSecret: 'm', a: { token: 't', b: { c: { signature: 's', d: { key: 'too deep' } } } }, list: [{ seed: 'x' }, 'plain'] };
    const before = JSON.stringify(dirty);
    expect(scrubSecrets(dirty)).toEqual({
      masterSecret: '[redacted]',
      a: { token: '[redacted]', b: { c: { signature: '[redacted]', d: { key: '[redacted]' } } } },
      list: [{ seed: '[redacted]' }, 'plain'],
    });
    expect(JSON.stringify(dirty)).toBe(before); // the caller's object is untouched
    for (const k of SECRET_KEYS) expect(scrubSecrets({ [k]: 'v' })).toEqual({ [k]: '[redacted]' });
  });

  it('keeps an error an error (class, message, stack) when it holds a secret', () => {
    const e = Object.assign(new TypeError('boom'), { authorization: 'Bearer x', code: 'E1' });
    const out = scrubSecrets({ err: e }) as { err: TypeError & { authorization: string; code: string } };
    expect(out.err).toBeInstanceOf(TypeError);
    expect([out.err.message, out.err.authorization, out.err.code]).toEqual(['boom', '[redacted]', 'E1']);
    expect(out.err.stack).toBe(e.stack);
    expect(e.authorization).toBe('Bearer x');
  });

  it('is what the logger writes', () => {
    let line = '';
    const log = createLogger({ level: 'info', destination: new Writable({ write: (c, _e, done) => ((line = c.toString()), done()) }) });
    log.info(
      { identityPriv: 'ab'.repeat(32), req: { headers: { authorization: 'Bearer t', host: 'h' } }, err: Object.assign(new Error('x'), { secret: 's' }) },
      'hello',
    );
    const o = JSON.parse(line);
    expect(o).toMatchObject({
      identityPriv: '[redacted]',
      req: { headers: { authorization: '[redacted]', host: 'h' } },
      err: { type: 'Error', message: 'x', secret: '[redacted]' },
    });
    expect(line).not.toContain('ab'.repeat(32));
  });

  it('stamps each line with the ISO time it was written at, to the millisecond', async () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', destination: new Writable({ write: (c, _e, done) => (lines.push(c.toString()), done()) }) });
    const before = Date.now();
    log.info('one');
    const afterOne = Date.now();
    while (Date.now() <= afterOne) await new Promise((r) => setTimeout(r, 1)); // a later millisecond
    const beforeTwo = Date.now();
    log.info('two');
    const after = Date.now();
    const [one, two] = lines.map((l) => JSON.parse(l).time as string);
    for (const t of [one, two]) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(one!)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(one!)).toBeLessThanOrEqual(afterOne);
    // Written in a later millisecond, the second line has its own time, not the first one's.
    expect(Date.parse(two!)).toBeGreaterThanOrEqual(beforeTwo);
    expect(Date.parse(two!)).toBeLessThanOrEqual(after);
  });
});
