import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Type } from '@sinclair/typebox';
import { createHttp } from '../../lib/http.ts';
import { createLogger } from '../../lib/log.ts';
import { notFound, insufficientTokens, tooManyRequests, Problem } from '../../lib/errors.ts';

const app = createHttp({ name: 'test', log: createLogger({ level: 'silent' }) });
let writes = 0;

beforeAll(async () => {
  app.post(
    '/things',
    { schema: { body: Type.Object({ name: Type.String({ minLength: 1 }), count: Type.Optional(Type.Integer({ minimum: 0 })) }) } },
    async (req) => {
      writes++;
      return { got: req.body };
    },
  );
  app.post('/empty', async (req) => ({ body: req.body ?? null }));
  app.get('/items/:id', async () => ({ ok: true }));
  app.get('/missing', async () => {
    throw notFound('Stack', 'stack:x');
  });
  app.get('/broke', async () => {
    throw insufficientTokens('compute', 0.5, 0.25);
  });
  app.get('/slow-down', async () => {
    throw tooManyRequests('cooldown', 42);
  });
  app.get('/boom', async () => {
    throw new Error('secret=abc internal detail');
  });
  app.get('/q', { schema: { querystring: Type.Object({ depth: Type.Integer({ minimum: 1 }) }) } }, async (req) => req.query);
  await app.ready();
});
afterAll(() => app.close());

const problem = (r: { headers: Record<string, unknown>; json(): unknown }) => {
  expect(String(r.headers['content-type'])).toContain('application/problem+json');
  const b = r.json() as Record<string, unknown>;
  for (const k of ['type', 'title', 'status', 'detail', 'code']) expect(b).toHaveProperty(k);
  return b;
};

describe('HTTP foundation', () => {
  it('malformed JSON is a 400 problem and changes nothing', async () => {
    const r = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'application/json' }, payload: '{"name":' });
    expect(r.statusCode).toBe(400);
    expect(problem(r).code).toBe('BAD_REQUEST');
    expect(writes).toBe(0);
  });

  it('a wrong type is a 400 with field errors, never coerced', async () => {
    const r = await app.inject({ method: 'POST', url: '/things', payload: { name: 123, count: '5' } });
    expect(r.statusCode).toBe(400);
    const b = problem(r);
    const paths = (b.errors as { path: string }[]).map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['name', 'count']));
    expect(writes).toBe(0);
  });

  it('a missing field names it', async () => {
    const r = await app.inject({ method: 'POST', url: '/things', payload: {} });
    expect(r.statusCode).toBe(400);
    expect((problem(r).errors as { path: string }[])[0].path).toBe('name');
  });

  it('accepts valid bodies with or without a content type', async () => {
    const r = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'text/plain' }, payload: '{"name":"a"}' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ got: { name: 'a' } });
  });

  it('an empty body is no body', async () => {
    const r = await app.inject({ method: 'POST', url: '/empty', headers: { 'content-type': 'application/json' }, payload: '' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ body: null });
  });

  it('bodies over 1 MiB are a 413 problem', async () => {
    const r = await app.inject({
      method: 'POST',
      url: '/things',
      payload: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(r.statusCode).toBe(413);
    expect(problem(r).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('domain problems keep their status and extra fields', async () => {
    const nf = await app.inject({ method: 'GET', url: '/missing' });
    expect(nf.statusCode).toBe(404);
    expect(problem(nf).code).toBe('NOT_FOUND');
    const pay = await app.inject({ method: 'GET', url: '/broke' });
    expect(pay.statusCode).toBe(402);
    expect(problem(pay)).toMatchObject({ token: 'compute', required: 0.5, available: 0.25 });
    const slow = await app.inject({ method: 'GET', url: '/slow-down' });
    expect(slow.statusCode).toBe(429);
    expect(slow.headers['retry-after']).toBe('42');
  });

  it("a problem's extra members never replace its own (status stays the HTTP status)", () => {
    const body = new Problem(409, 'SLEEVE_FROZEN', 'Conflict', 'frozen', { status: 'compensated', code: 'x', sagaId: 'needle:1' }).toJSON();
    expect(body).toMatchObject({ status: 409, code: 'SLEEVE_FROZEN', sagaId: 'needle:1' });
  });

  it('unknown routes are 404 problems; a known path with another method is a 405 naming the allowed ones', async () => {
    const r = await app.inject({ method: 'GET', url: '/nope' });
    expect(r.statusCode).toBe(404);
    expect(problem(r).code).toBe('ROUTE_NOT_FOUND');
    const get = await app.inject({ method: 'GET', url: '/things' });
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe('POST');
    expect(problem(get)).toMatchObject({ status: 405, code: 'METHOD_NOT_ALLOWED' });
    const del = await app.inject({ method: 'DELETE', url: '/items/42/' });
    expect(del.statusCode).toBe(405);
    expect(del.headers.allow).toBe('GET, HEAD');
    const w0 = writes;
    const put = await app.inject({ method: 'PUT', url: '/things', payload: { name: 'x' } });
    expect(put.statusCode).toBe(405);
    expect(writes).toBe(w0);
    expect((await app.inject({ method: 'GET', url: '/items/42/more' })).statusCode).toBe(404);
  });

  it("a malformed URL is a 400 problem with the API's code, not the framework's", async () => {
    const r = await app.inject({ method: 'GET', url: '/items/%E0%A4%A' });
    expect(r.statusCode).toBe(400);
    const b = problem(r);
    expect(b.code).toBe('BAD_REQUEST');
    expect(JSON.stringify(b)).not.toMatch(/FST_/i);
  });

  it('an internal failure leaks no detail', async () => {
    const r = await app.inject({ method: 'GET', url: '/boom' });
    expect(r.statusCode).toBe(500);
    expect(r.body).not.toContain('secret');
  });

  it('query strings are coerced and validated', async () => {
    expect((await app.inject({ method: 'GET', url: '/q?depth=3' })).json()).toEqual({ depth: 3 });
    expect((await app.inject({ method: 'GET', url: '/q?depth=zero' })).statusCode).toBe(400);
  });
});
