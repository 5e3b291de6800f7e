// Operability end to end (issue 17): the embedded platform on PostgreSQL, NATS and a private Redis
// (port shift 34000) serves Prometheus metrics at /metrics of every service (one registry per
// process) that move with real traffic, with bounded labels and no ids.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startCluster, call, type Cluster } from './helpers/cluster.ts';
import { parseProm, sum, has, type Sample } from './helpers/prom.ts';
import { privateRedis } from '../bench/load.ts';
import WebSocket from 'ws';

let c: Cluster;
let redis: Awaited<ReturnType<typeof privateRedis>>;

beforeAll(async () => {
  redis = await privateRedis();
  c = await startCluster({ mode: 'embedded', realAdapters: true, redisUrl: redis.url, shift: 34000 });
  await c.waitHealthy(90_000);
}, 110_000);

afterAll(async () => {
  await c?.stop();
  await redis?.cleanup();
}, 30_000);

let lastText = '';
async function scrape(base: string): Promise<Sample[]> {
  const res = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(10_000) });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  lastText = await res.text();
  return parseProm(lastText);
}

const gql = (query: string, operationName?: string) => call('POST', `${c.gateway}/graphql`, { query, operationName });

describe('metrics', () => {
  it('count and time REST and GraphQL traffic by route template, operation and outcome', async () => {
    const before = await scrape(c.gateway);
    const stack = await call('POST', `${c.gateway}/v1/stacks`, { name: 'ops-metrics' });
    expect(stack.status).toBe(201);
    const sleeve = await call('POST', `${c.gateway}/v1/sleeves`, { stackId: stack.body.id, embodimentType: 'ai' });
    expect(sleeve.status).toBe(201);
    for (let i = 0; i < 3; i++)
      expect((await call('POST', `${c.gateway}/v1/sleeves/${encodeURIComponent(sleeve.body.id)}/perceive`, { input: `hello ${i}` })).status).toBe(200);
    expect((await call('GET', `${c.gateway}/v1/stacks/${encodeURIComponent(stack.body.id)}`)).status).toBe(200);
    expect((await call('GET', `${c.gateway}/v1/stacks/nope`)).status).toBe(404);
    expect((await call('GET', `${c.gateway}/no/such/route`)).status).toBe(404);
    // Eight identical concurrent queries: the router runs fewer subgraph fetches than it serves.
    const named = await Promise.all(Array.from({ length: 8 }, () => gql('query OpsStacks { stacks(first: 5) { id name } }', 'OpsStacks')));
    for (const r of named) expect(r.status).toBe(200);
    expect((await gql('query Broken { nosuchfield }')).status).toBe(400);
    expect((await gql('{ stack(id: "stack:none") { id } }')).status).toBe(200);

    const after = await scrape(c.gateway);
    const d = (name: string, labels: Record<string, string>) => sum(after, name, labels) - sum(before, name, labels);
    expect(d('cog_http_requests_total', { service: 'gateway', method: 'POST', route: '/v1/stacks', status: '201' })).toBe(1);
    expect(d('cog_http_requests_total', { service: 'gateway', method: 'POST', route: '/v1/sleeves/:id/perceive', status: '200' })).toBe(3);
    expect(d('cog_http_requests_total', { service: 'gateway', method: 'GET', route: '/v1/stacks/:id', status: '404' })).toBe(1);
    expect(d('cog_http_requests_total', { service: 'gateway', route: '(unmatched)', status: '404' })).toBe(1);
    expect(d('cog_http_request_duration_seconds_count', { service: 'gateway', route: '/v1/sleeves/:id/perceive' })).toBe(3);
    expect(d('cog_http_request_duration_seconds_sum', { service: 'gateway', route: '/v1/sleeves/:id/perceive' })).toBeGreaterThan(0);
    expect(d('cog_graphql_operations_total', { operation: 'OpsStacks', type: 'query', outcome: 'ok' })).toBe(8);
    expect(d('cog_graphql_operations_total', { operation: '(anonymous)', type: 'query', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(d('cog_graphql_operations_total', { outcome: 'invalid' })).toBe(1);
    expect(d('cog_graphql_operation_duration_seconds_count', { operation: 'OpsStacks' })).toBe(8);
    const executed = d('cog_graphql_subgraph_fetches_total', { subgraph: 'stacks', result: 'executed' });
    const joined = d('cog_graphql_subgraph_fetches_total', { subgraph: 'stacks', result: 'joined' });
    expect(executed).toBeGreaterThan(0);
    expect(executed + joined).toBeGreaterThanOrEqual(9);

    // No id ever reaches a label (route templates only).
    for (const s of after)
      for (const v of Object.values(s.labels)) {
        expect(v).not.toContain(stack.body.id);
        expect(v).not.toContain(sleeve.body.id);
        expect(v).not.toContain('nope');
      }
  }, 60_000);

  it('expose the platform state: epoch, tip age, outboxes, pool, residues, sagas, folds, passes, sockets', async () => {
    // Epochs pass (4 s each), so the Thalamus folds and the worker runs its passes.
    const ws = new WebSocket(`${c.gateway.replace('http', 'ws')}/v1/events?subjects=cog.epoch.advanced`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const deadline = Date.now() + 30_000;
    let s: Sample[] = [];
    for (;;) {
      s = await scrape(c.gateway);
      if ((sum(s, 'cog_thalamus_fold_duration_seconds_count') > 0 && sum(s, 'cog_worker_pass_duration_seconds_count') > 0) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect(sum(s, 'cog_epoch')).toBeGreaterThan(0);
    expect(has(s, 'cog_medulla_tip_age_seconds')).toBe(true);
    expect(sum(s, 'cog_medulla_tip_age_seconds')).toBeLessThan(60);
    expect(has(s, 'cog_event_outbox_depth')).toBe(true);
    expect(has(s, 'cog_event_outbox_oldest_age_seconds')).toBe(true);
    expect(has(s, 'cog_chain_outbox_depth', { status: 'pending' })).toBe(true);
    expect(has(s, 'cog_sagas', { status: 'running' })).toBe(true);
    expect(lastText).toContain('# TYPE cog_residues_open gauge');
    expect(sum(s, 'cog_db_pool_connections', { state: 'max' })).toBeGreaterThan(0);
    expect(has(s, 'cog_db_pool_waiting_clients')).toBe(true);
    expect(has(s, 'cog_bus_consumer_pending_messages', { consumer: 'treasury-slash' })).toBe(true);
    expect(sum(s, 'cog_thalamus_fold_duration_seconds_count')).toBeGreaterThan(0);
    expect(sum(s, 'cog_worker_pass_duration_seconds_count', { status: 'ran' })).toBeGreaterThan(0);
    expect(sum(s, 'cog_websocket_connections', { endpoint: 'events' })).toBe(1);
    expect(has(s, 'process_cpu_seconds_total')).toBe(true);
    ws.close();
    // One registry for the process: an internal service's /metrics is the same set.
    const m = await scrape(c.urls.medulla!);
    expect(sum(m, 'cog_http_requests_total', { service: 'gateway' })).toBeGreaterThan(0);
    expect(sum(m, 'cog_http_requests_total', { service: 'medulla', route: '/health' })).toBeGreaterThan(0); // the health checks
  }, 60_000);
});

describe('readiness', () => {
  const services = ['gateway', 'medulla', 'hippocampus', 'thalamus', 'dhf', 'treasury', 'faucet', 'needlecast'];
  const ready = async (name: string) => {
    const res = await fetch(`${c.urls[name]}/readyz`, { signal: AbortSignal.timeout(10_000) });
    return { status: res.status, type: res.headers.get('content-type') ?? '', body: (await res.json()) as Record<string, any> };
  };
  const until = async (name: string, ok: (r: Awaited<ReturnType<typeof ready>>) => boolean, ms = 20_000) => {
    const t0 = Date.now();
    for (;;) {
      const r = await ready(name);
      if (ok(r) || Date.now() - t0 > ms) return r;
      await new Promise((res) => setTimeout(res, 300));
    }
  };

  it('every service is ready when its dependencies are', async () => {
    for (const s of services) {
      const r = await until(s, (x) => x.status === 200);
      expect(r.status, `${s}: ${JSON.stringify(r.body)}`).toBe(200);
      expect(r.body.checks.database, s).toBe('up');
    }
    expect((await ready('thalamus')).body.checks).toMatchObject({ medulla: 'up', cortex: 'up', bus: 'up' });
  }, 60_000);

  it('with Redis stopped the faucet is not ready (503 naming the cache), the gateway degraded but ready; both recover', async () => {
    await redis.stop();
    try {
      const faucet = await until('faucet', (x) => x.status === 503);
      expect(faucet.status).toBe(503);
      expect(faucet.type).toContain('application/problem+json');
      expect(faucet.body).toMatchObject({ status: 503, code: 'NOT_READY', down: ['cache'] });
      expect(faucet.body.detail).toContain('cache');
      expect(faucet.body.checks.database).toBe('up');
      const gateway = await until('gateway', (x) => x.body.degraded?.includes('cache'));
      expect(gateway.status).toBe(200);
      expect(gateway.body.degraded).toEqual(['cache']);
      // Liveness is not readiness: the processes still answer.
      expect((await call('GET', `${c.gateway}/healthz`)).status).toBe(200);
      expect((await call('GET', `${c.urls.faucet}/health`)).status).toBe(200);
    } finally {
      await redis.start();
    }
    expect((await until('faucet', (x) => x.status === 200, 30_000)).status).toBe(200);
    expect((await until('gateway', (x) => !x.body.degraded, 30_000)).body.checks.cache).toBe('up');
  }, 90_000);
});
