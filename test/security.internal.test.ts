// Internal services (needlecast :7071, thalamus :7072, DHF :7073, treasury :7074) with
// COG_INTERNAL_TOKEN: every route but health needs `Authorization: Bearer <token>` (401 otherwise);
// their callers send it; without a token they refuse to listen off loopback; the public faucet is
// rate limited per client (429 with Retry-After).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttp, isLoopback, listen } from '../lib/http.ts';
import { loadConfig } from '../lib/config.ts';
import { medullaInfo, type Platform } from '../lib/platform.ts';
import type { RunningService, ServiceStarter } from '../lib/service.ts';
import { startNeedlecast } from '../subgraphs/sleeves/needlecast/service.ts';
import { startTreasury } from '../subgraphs/economy/treasury/service.ts';
import { startDhf } from '../subgraphs/memory/dhf/service.ts';
import { startThalamus } from '../subgraphs/chains/thalamus/service.ts';
import { startFaucet } from '../subgraphs/economy/faucet/service.ts';
import { FAUCET_IP_LIMIT } from '../subgraphs/economy/faucet/routes.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import needlecastRest from '../compat-rest/needlecast.ts';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { call, isProblem } from './helpers/secure-gateway.ts';

const TOKEN = 'test-internal-token-0123456789';
const PORTS = { NEEDLECAST_PORT: '0', THALAMUS_PORT: '0', DHF_PORT: '0', TREASURY_PORT: '0', FAUCET_PORT: '0' };

let p: TestPlatform;
const svc: Record<string, RunningService> = {};

beforeAll(async () => {
  p = await testPlatform({ COG_INTERNAL_TOKEN: TOKEN, ...PORTS });
  svc.needlecast = await startNeedlecast(p);
  svc.thalamus = await startThalamus(p);
  svc.dhf = await startDhf(p);
  svc.treasury = await startTreasury(p);
  svc.faucet = await startFaucet(p);
});
afterAll(async () => {
  for (const s of Object.values(svc)) await s.close().catch(() => {});
  await p?.cleanup();
});

const routes: Array<[service: string, method: string, path: string, body?: unknown]> = [
  ['needlecast', 'POST', '/needlecast', { from: 'sleeve:none', to: 'sleeve:none-2' }],
  ['needlecast', 'GET', '/needlecast/needle:none'],
  ['thalamus', 'GET', '/v1/epoch'],
  ['thalamus', 'POST', '/v1/epoch/tick'],
  ['dhf', 'POST', '/v1/reconstruct', { stackId: 'stack:none', sleeveId: 'sleeve:none', depth: 1 }],
  ['treasury', 'GET', '/v1/treasury/issuance/stack:none'],
  ['treasury', 'POST', '/v1/treasury/claim', { stackId: 'stack:none' }],
];

describe('internal bearer token', () => {
  it('health answers without the token', async () => {
    for (const name of ['needlecast', 'thalamus', 'dhf', 'treasury']) {
      const r = await call(svc[name].url!, 'GET', '/health');
      expect(r.status, name).toBe(200);
    }
  });

  it('every other route is a 401 problem without the token, with a wrong one, or with a near miss', async () => {
    const before = await p.db.prisma.ledgerEntry.count();
    for (const [name, method, path, body] of routes) {
      for (const auth of [undefined, 'Bearer wrong', `Bearer ${TOKEN}x`, TOKEN, `bearer ${TOKEN}`, `Bearer  ${TOKEN}`]) {
        const r = await call(svc[name].url!, method, path, body, auth ? { authorization: auth } : {});
        expect(r.status, `${name} ${method} ${path} ${auth}`).toBe(401);
        expect(isProblem(r)).toBe(true);
        expect(r.headers.get('www-authenticate')).toBe('Bearer realm="cog-internal"');
      }
    }
    // unknown routes and health look-alikes are refused too
    for (const path of ['/nothing', '/health/../v1/epoch', '/healthz/x', '/health%2F..%2Fv1%2Fepoch']) {
      expect((await call(svc.thalamus.url!, 'GET', path)).status, path).toBe(401);
    }
    expect(await p.db.prisma.ledgerEntry.count()).toBe(before);
  });

  it('with the token the routes answer (their own 404/409, never 401)', async () => {
    for (const [name, method, path, body] of routes) {
      const r = await call(svc[name].url!, method, path, body, { authorization: `Bearer ${TOKEN}` });
      expect(r.status, `${name} ${method} ${path}: ${r.text}`).not.toBe(401);
      expect(r.status).toBeLessThan(500);
    }
  });

  it('the gateway sends the token to the Needlecast Router (compat-rest/needlecast.ts)', async () => {
    const viaGateway = async (platform: Platform) => {
      const app = createHttp({ name: 'gateway-test', log: p.log });
      await app.register(needlecastRest, { platform });
      const r = await app.inject({ method: 'POST', url: '/v1/needlecast', payload: { from: 'sleeve:none', to: 'sleeve:none-2' } });
      await app.close();
      return r.statusCode;
    };
    const withToken = { ...p, config: { ...p.config, urls: { ...p.config.urls, needlecast: svc.needlecast.url! } } };
    expect(await viaGateway(withToken)).toBe(404); // the router's own answer: no such sleeve
    const without = { ...withToken, config: { ...withToken.config, internalToken: undefined } };
    expect(await viaGateway(without)).toBe(401);
  });

  it('the epoch follower sends the token to Medulla (lib/platform.ts medullaInfo)', async () => {
    const app = createHttp({ name: 'medulla-stub', log: p.log, internalToken: TOKEN });
    app.post('/rpc', async () => ({ jsonrpc: '2.0', id: 1, result: { epoch: 7, height: 7, tip: 'ab'.repeat(32) } }));
    const port = await listen(app, 'medulla-stub', '127.0.0.1', 0);
    try {
      expect((await medullaInfo(`http://127.0.0.1:${port}`, TOKEN)).epoch).toBe(7);
      await expect(medullaInfo(`http://127.0.0.1:${port}`)).rejects.toThrow();
    } finally {
      await app.close();
    }
  });
});

describe('binding', () => {
  it('recognises loopback addresses', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.5', '192.168.1.1', 'example.com', '128.0.0.1']) expect(isLoopback(h), h).toBe(false);
  });

  it('internal services refuse a non-loopback COG_HOST without COG_INTERNAL_TOKEN, with a clear message', async () => {
    const open = await testPlatform({ COG_HOST: '0.0.0.0', ...PORTS });
    try {
      const starters: Array<[string, ServiceStarter]> = [
        ['needlecast', startNeedlecast],
        ['dhf', startDhf],
        ['treasury', startTreasury],
        ['thalamus', startThalamus],
      ];
      for (const [name, start] of starters) {
        await expect(start(open), name).rejects.toThrow(/without COG_INTERNAL_TOKEN.*loopback/);
      }
      // the public faucet may bind any address
      const faucet = await startFaucet(open);
      await faucet.close();
    } finally {
      await open.cleanup();
    }
    // with the token they bind where they are told
    const tokened = await testPlatform({ COG_HOST: '0.0.0.0', COG_INTERNAL_TOKEN: TOKEN, ...PORTS });
    try {
      const dhf = await startDhf(tokened);
      expect((await call(dhf.url!, 'GET', '/health')).status).toBe(200);
      await dhf.close();
    } finally {
      await tokened.cleanup();
    }
  });

  it('a short or blank-bearing COG_INTERNAL_TOKEN stops the start', () => {
    expect(() => loadConfig({ COG_INTERNAL_TOKEN: 'short' })).toThrow(/COG_INTERNAL_TOKEN/);
    expect(() => loadConfig({ COG_INTERNAL_TOKEN: 'has a space in it ok' })).toThrow(/COG_INTERNAL_TOKEN/);
    expect(loadConfig({ COG_INTERNAL_TOKEN: TOKEN }).internalToken).toBe(TOKEN);
  });
});

describe('public faucet', () => {
  it('needs no token, gives one drip per stack per cooldown and limits each client address: 429 with Retry-After', async () => {
    const url = svc.faucet.url!;
    // The per-client limit counts in minute windows (faucet/routes.ts): a test that ran across a
    // window's end started counting again and saw no 429 (a CI run). It starts in a fresh window.
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 10_000) await new Promise((r) => setTimeout(r, left + 50));
    const stack = await createStack(p, { name: 'drip' });
    const first = await call(url, 'POST', '/v1/faucet/drip', { stackId: stack.id });
    expect(first.status, first.text).toBe(200);
    const again = await call(url, 'POST', '/v1/faucet/drip', { stackId: stack.id });
    expect(again.status).toBe(429);
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(isProblem(again)).toBe(true);
    // per client: after FAUCET_IP_LIMIT requests this minute every drip is a 429, whatever the stack
    let limited: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < FAUCET_IP_LIMIT + 2 && !limited; i++) {
      const r = await call(url, 'POST', '/v1/faucet/drip', { stackId: `stack:none:${i}` });
      if (r.status === 429) limited = r;
      else expect(r.status).toBe(404);
    }
    expect(limited, 'no 429 after the per-client limit').toBeDefined();
    expect(limited!.body.code).toBe('RATE_LIMITED');
    const retry = Number(limited!.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
  });
});
