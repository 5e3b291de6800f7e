import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { startGateway } from '../../router/service.ts';
import type { RunningService } from '../../lib/service.ts';

let p: TestPlatform;
let gw: RunningService;

beforeAll(async () => {
  p = await testPlatform({ GATEWAY_PORT: '0' });
  gw = await startGateway(p);
});
afterAll(async () => {
  await gw?.close();
  await p?.cleanup();
});

describe('gateway', () => {
  it('GET /healthz -> {ok: true, name, ts (Unix ms)}', async () => {
    const before = Date.now();
    const r = await fetch(`${gw.url}/healthz`);
    expect(r.status).toBe(200);
    const b = (await r.json()) as { ok: boolean; name: string; ts: number };
    expect(b.ok).toBe(true);
    expect(typeof b.name).toBe('string');
    expect(Number.isInteger(b.ts)).toBe(true);
    expect(b.ts).toBeGreaterThanOrEqual(before);
    expect(b.ts).toBeLessThanOrEqual(Date.now());
  });

  it('serves the composed supergraph at /graphql with every subgraph present', async () => {
    const query =
      '{ stacksHealth { ok name } sleevesHealth { name } memoryHealth { name } chainsHealth { name } economyHealth { name } residuesHealth { name } }';
    const r = await fetch(`${gw.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    expect(r.status).toBe(200);
    const b = (await r.json()) as { data: Record<string, { name: string }> };
    expect(Object.values(b.data).map((h) => h.name)).toEqual(['stacks', 'sleeves', 'memory', 'chains', 'economy', 'residues']);
  });

  it('unknown REST routes are problem+json 404s', async () => {
    const r = await fetch(`${gw.url}/v1/nothing-here`);
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
  });
});

describe('GraphiQL', () => {
  it('is served locally with its assets (no CDN)', async () => {
    const page = await (await fetch(`${gw.url}/graphiql`)).text();
    expect(page).toContain('/graphiql/assets/graphiql.js');
    expect(page).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)/);
    for (const a of ['react.js', 'react-dom.js', 'graphiql.js', 'graphiql.css']) {
      const r = await fetch(`${gw.url}/graphiql/assets/${a}`);
      expect(r.status).toBe(200);
      expect((await r.arrayBuffer()).byteLength).toBeGreaterThan(1000);
    }
  });
});
