// lib/metrics.ts and GET /metrics in-process: who may scrape, the database gauges read at scrape
// time (one cached query), the bus consumer lag, and the bound on operation-name labels.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createHttp } from '../../lib/http.ts';
import { createLogger } from '../../lib/log.ts';
import { MemoryBus } from '../../lib/bus/memory.ts';
import { observePlatform, operationLabel } from '../../lib/metrics.ts';
import { OUTBOX_BATCH_SUBJECT } from '../../lib/events.ts';
import { mountReadiness } from '../../lib/ready.ts';
import { readinessUrls } from '../../bin/up.ts';
import { loadConfig } from '../../lib/config.ts';
import fs from 'node:fs';
import { parse } from 'yaml';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { parseProm, sum } from '../helpers/prom.ts';

const log = createLogger({ level: 'silent' });
const TOKEN = 'a-long-internal-token-0123456789';

describe('GET /metrics access', () => {
  it('a public service answers loopback scrapers only, unless the ops token is set, and then needs it', async () => {
    const open = createHttp({ name: 'pub', log });
    expect((await open.inject({ url: '/metrics' })).statusCode).toBe(200);
    const remote = await open.inject({ url: '/metrics', remoteAddress: '203.0.113.9' });
    expect(remote.statusCode).toBe(403);
    expect(remote.headers['content-type']).toContain('application/problem+json');
    const guarded = createHttp({ name: 'pub', log, opsToken: TOKEN });
    expect((await guarded.inject({ url: '/metrics' })).statusCode).toBe(401);
    expect((await guarded.inject({ url: '/metrics', headers: { authorization: 'Bearer wrong-token-wrong-token' } })).statusCode).toBe(401);
    expect((await guarded.inject({ url: '/metrics', remoteAddress: '203.0.113.9', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(200);
  });

  it('an internal service with COG_INTERNAL_TOKEN needs it like every internal route', async () => {
    const app = createHttp({ name: 'int', log, internalToken: TOKEN });
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(401);
    const ok = await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('cog_http_requests_total');
    expect(ok.body).not.toContain(TOKEN);
  });

  it('a server named by an id serves none and labels nothing', async () => {
    const app = createHttp({ name: 'sleeve-sleeve:ai:1:abc', log, metrics: false });
    app.get('/identity', async () => ({ ok: true }));
    await app.inject({ url: '/identity' });
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(404);
    const text = await (await createHttp({ name: 'x', log }).inject({ url: '/metrics' })).body;
    expect(text).not.toContain('sleeve:ai:1:abc');
  });
});

describe('state read at scrape time', () => {
  let p: TestPlatform;
  let stop: () => void;
  beforeAll(async () => {
    p = await testPlatform({ COG_METRICS_CACHE_MS: '0', COG_READY_TIP_AGE_MS: '300' });
    stop = observePlatform(p);
  });
  afterAll(async () => {
    stop();
    await p.cleanup();
  });

  const scrape = async () => parseProm((await createHttp({ name: 't', log }).inject({ url: '/metrics' })).body);

  it('outbox depth and age, open residues by kind, sagas and the epoch follow the database', async () => {
    p.setEpoch(7);
    expect(sum(await scrape(), 'cog_event_outbox_depth')).toBe(0);
    await p.db.prisma.eventOutbox.create({ data: { subject: 'cog.test', msgId: 'm1', data: {}, createdAt: new Date(Date.now() - 5000) } });
    await p.db.prisma.residue.create({
      data: { id: 'r1', kind: 'drift', trigger: 't', bountyMilli: 1, status: 'open', epoch: 1, expiresAtEpoch: 100, evidence: {}, dedupeKey: 'k1' },
    });
    await p.db.prisma.residue.create({
      data: { id: 'r2', kind: 'drift', trigger: 't', bountyMilli: 1, status: 'resolved', epoch: 1, expiresAtEpoch: 100, evidence: {}, dedupeKey: 'k2' },
    });
    // A row of a batch of writes carries several events: each counts.
    await p.db.prisma.eventOutbox.create({
      data: {
        subject: OUTBOX_BATCH_SUBJECT,
        msgId: 'batch:m2',
        data: {
          events: [
            { subject: 'cog.test', msgId: 'm2', data: {} },
            { subject: 'cog.test', msgId: 'm3', data: {} },
          ],
        },
      },
    });
    const s = await scrape();
    expect(sum(s, 'cog_event_outbox_depth')).toBe(3);
    expect(sum(s, 'cog_event_outbox_oldest_age_seconds')).toBeGreaterThanOrEqual(4.5);
    expect(sum(s, 'cog_residues_open', { kind: 'drift' })).toBe(1);
    expect(sum(s, 'cog_sagas', { status: 'running' })).toBe(0);
    expect(sum(s, 'cog_epoch')).toBe(7);
    expect(sum(s, 'cog_medulla_tip_age_seconds')).toBeLessThan(5);
  });

  it('/readyz answers 200 with its checks, and 503 problem+json naming Medulla once the tip stops moving', async () => {
    const app = createHttp({ name: 'r', log });
    mountReadiness(app, p, { name: 'r', needs: ['database', 'bus', 'cache', 'medulla'] });
    p.setEpoch(8);
    const ok = await app.inject({ url: '/readyz' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ ok: true, checks: { database: 'up', bus: 'up', cache: 'up', medulla: 'up' } });
    await new Promise((r) => setTimeout(r, 1400)); // past the tip age and the 1 s answer cache
    const stale = await app.inject({ url: '/readyz' });
    expect(stale.statusCode).toBe(503);
    expect(stale.headers['content-type']).toContain('application/problem+json');
    expect(stale.json()).toMatchObject({ code: 'NOT_READY', down: ['medulla'], checks: { database: 'up', medulla: 'down' } });
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(404); // liveness is each service's own route
    await app.close();
  });

  it('a durable consumer lag counts the matching messages it has not acknowledged', async () => {
    const bus = new MemoryBus();
    const sub = await bus.subscribe({ subjects: ['cog.a.>'], durable: 'lagging', autoAck: false }, () => {});
    for (let i = 0; i < 3; i++) await bus.publish('cog.a.x', { i });
    await bus.publish('cog.b.x', {});
    await new Promise((r) => setTimeout(r, 50));
    expect(await bus.consumerLag()).toEqual([{ consumer: 'lagging', pending: 3 }]);
    await sub.close();
    await bus.close();
  });
});

describe('deploy/compose.yaml', () => {
  it('checks every cog process by its own /readyz', () => {
    const doc = parse(fs.readFileSync(new URL('../../deploy/compose.yaml', import.meta.url), 'utf8'), { merge: true }) as {
      services: Record<string, { command?: string[]; healthcheck?: { test: string[] } }>;
    };
    const cog = Object.values(doc.services).filter((s) => s.command?.[0] === 'node');
    const urls = readinessUrls(loadConfig({}), {});
    expect(cog.length).toBe(urls.length);
    cog.forEach((s, i) => expect(s.healthcheck?.test.join(' ')).toContain(`'${urls[i]!.url}'`));
  });
});

describe('operation name labels', () => {
  it('keep valid names, fold junk and anything past the cap into "other"', () => {
    expect(operationLabel(undefined)).toBe('(anonymous)');
    expect(operationLabel('GetStack')).toBe('GetStack');
    expect(operationLabel('bad name {')).toBe('other');
    for (let i = 0; i < 300; i++) operationLabel(`Op${i}`);
    expect(operationLabel('NeverSeenBefore')).toBe('other');
    expect(operationLabel('GetStack')).toBe('GetStack');
  });
});
