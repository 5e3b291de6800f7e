// jsonBody writes what JSON.stringify writes, byte for byte, whether or not it splits the value into
// parts; and it is what the HTTP layer answers with, a large reply as one Buffer.
import { describe, expect, it } from 'vitest';
import { jsonBody } from './json-body.ts';
import { createHttp } from './http.ts';
import { createLogger } from './log.ts';

const text = (b: string | Buffer) => (typeof b === 'string' ? b : b.toString('utf8'));
const long = <T>(f: (i: number) => T) => Array.from({ length: 450 }, (_, i) => f(i));

describe('jsonBody', () => {
  const cases: Array<[string, unknown]> = [
    ['a small object', { a: 1, b: [1, 2, 3], c: 'x' }],
    ['a small array', [1, 'two', null]],
    ['null', null],
    ['a string', 'plain'],
    ['a long array at the top', long((i) => ({ i, s: `n${i}` }))],
    [
      'an object with long arrays and members JSON leaves out',
      { fragments: long((i) => ({ cid: `cog://${i}`, epoch: i })), broken: long((i) => `b${i}`), skipped: undefined, fn: () => 1, fidelity: 0.5 },
    ],
    [
      'elements with no JSON form, dates and toJSON',
      { xs: long((i) => (i % 3 === 0 ? undefined : i % 3 === 1 ? new Date(i * 1000) : { toJSON: () => `t${i}` })) },
    ],
    ['text beyond ASCII', { texts: long((i) => `héllo ✓ 𝄞 ${i} "quoted" \\ \n`) }],
    ['the long array first, small members after', { list: long((i) => i), tail: { nested: [1, { deep: true }] } }],
    ['a null-prototype object', Object.assign(Object.create(null), { list: long((i) => [i, i + 1]) })],
    [
      'a GraphQL result: the long array three objects down, null-prototype objects, a member whose toJSON gives nothing',
      {
        data: Object.assign(Object.create(null), {
          recall: Object.assign(Object.create(null), {
            fragments: long((i) => ({ cid: `c${i}`, text: `t${i}` })),
            fidelity: 1,
            none: { toJSON: () => undefined },
          }),
        }),
        extensions: undefined,
      },
    ],
    ['a long array deeper than it is looked for', { a: { b: { c: { d: { e: long((i) => i) } } } } }],
  ];
  for (const [name, value] of cases) {
    it(`${name}: the same text as JSON.stringify`, () => {
      expect(text(jsonBody(value))).toBe(JSON.stringify(value));
    });
  }

  it('writes a value with long arrays at its top as a Buffer, a small one as a string; a toJSON object whole', () => {
    expect(Buffer.isBuffer(jsonBody({ fragments: long((i) => i) }))).toBe(true);
    expect(Buffer.isBuffer(jsonBody(long((i) => i)))).toBe(true);
    expect(Buffer.isBuffer(jsonBody({ data: { recall: { fragments: long((i) => i) } } }))).toBe(true);
    expect(typeof jsonBody({ fragments: [1, 2] })).toBe('string');
    const custom = { toJSON: () => ({ replaced: true }), list: long((i) => i) };
    expect(jsonBody(custom)).toBe('{"replaced":true}');
  });

  it('is what a reply carries: the whole body, its length, the JSON content type', async () => {
    const app = createHttp({ name: 'json-body-test', log: createLogger({ level: 'silent' }) });
    const body = { fragments: long((i) => ({ cid: `cog://${i}`, text: `✓ ${i}` })), broken: [], fidelity: 1 };
    app.get('/big', async () => body);
    app.get('/big-schema', { schema: { response: { 200: { type: 'object' } } } }, async () => body);
    await app.ready();
    try {
      for (const url of ['/big', '/big-schema']) {
        const r = await app.inject({ method: 'GET', url });
        expect(r.statusCode).toBe(200);
        expect(r.headers['content-type']).toMatch(/^application\/json/);
        expect(Number(r.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(body)));
        expect(r.json()).toEqual(body);
      }
    } finally {
      await app.close();
    }
  });
});
