// The MCP tools against the routes they stand for, without a platform: compat-rest's plugins are
// registered on a bare Fastify instance (never listening, no handler run) and each tool's schemas
// must be the ones its route registers, so tool and route cannot drift apart.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { registerRest } from '../compat-rest/index.ts';
import type { Platform } from '../lib/platform.ts';
import { TOOLS, argumentProblem, compiledTools, fieldProblems, requestOf } from '../mcp/tools.ts';

const plain = (s: unknown) => (s === undefined ? undefined : JSON.parse(JSON.stringify(s)));

async function routeTable(): Promise<Map<string, Record<string, unknown>>> {
  const app = Fastify({ logger: false });
  app.setValidatorCompiler(() => () => true);
  const out = new Map<string, Record<string, unknown>>();
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) out.set(`${m} ${r.url}`, (r.schema ?? {}) as Record<string, unknown>);
  });
  await registerRest(app, {} as Platform); // registration reads no platform member; handlers never run
  await app.ready();
  await app.close();
  return out;
}

describe('MCP tools', () => {
  it('use the schemas their routes register', async () => {
    const routes = await routeTable();
    for (const t of TOOLS) {
      const route = routes.get(`${t.method} ${t.url}`);
      expect(route, `${t.name}: no route ${t.method} ${t.url}`).toBeDefined();
      for (const part of ['params', 'querystring', 'body'] as const) {
        expect(plain(t.schema[part]), `${t.name} ${part}`).toEqual(plain(route![part]));
      }
      for (const param of Object.keys(t.params ?? {})) expect(t.url, t.name).toContain(`:${param}`);
    }
  });

  it('name every argument problem by its path, as the gateway does', () => {
    const perceive = compiledTools().find((t) => t.name === 'perceive')!;
    expect(perceive.validate({ sleeveId: '', input: 1, extra: true })).toBe(false);
    const problem = argumentProblem(fieldProblems(perceive.validate.errors));
    expect(problem).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    expect(problem.errors).toEqual(
      expect.arrayContaining([
        { path: 'sleeveId', message: 'must NOT have fewer than 1 characters' },
        { path: 'input', message: 'must be string' },
        { path: 'extra', message: 'is not an argument of this tool' },
      ]),
    );
    const proof = compiledTools().find((t) => t.name === 'submit_residue_proof')!;
    expect(proof.validate({ residueId: 'r', claimant: 'c', proof: 'x' })).toBe(false);
    expect(fieldProblems(proof.validate.errors)).toEqual([{ path: 'proof', message: 'must be object' }]);
  });

  it('make one request per call: path parameters encoded, the rest as body or query', () => {
    const byName = new Map(compiledTools().map((t) => [t.name, t]));
    expect(requestOf(byName.get('perceive')!, { sleeveId: 'sleeve:ai:1:ab/cd', input: 'hi' })).toEqual({
      method: 'POST',
      path: '/v1/sleeves/sleeve%3Aai%3A1%3Aab%2Fcd/perceive',
      body: { input: 'hi' },
    });
    expect(requestOf(byName.get('list_residues')!, { status: 'open', limit: 5 })).toEqual({
      method: 'GET',
      path: '/v1/coordination/residues?status=open&limit=5',
    });
    expect(requestOf(byName.get('sync')!, { sleeveId: 's' })).toEqual({ method: 'POST', path: '/v1/sleeves/s/sync' });
    expect(requestOf(byName.get('list_sleeves')!, {})).toEqual({ method: 'GET', path: '/v1/sleeves' });
  });
});
