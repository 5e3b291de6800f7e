// Needlecast saga: six steps in order, costs, compensation at every failure point, recovery of a
// saga left in flight, idempotent saga ids, and the router + gateway shapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createHttp } from '../lib/http.ts';
import type { RunningService } from '../lib/service.ts';
import { createStack, getStackRow } from '../subgraphs/stacks/stacks.ts';
import { addDrift, getSleeveRow, listAliveSleeves, spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { perceive } from '../flows/memory.ts';
import { hippocampusClient, localHippocampus } from '../subgraphs/memory/hippocampus/client.ts';
import { balancesOf, burn, poolAccount, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { getSaga, recoverSagas, runNeedlecast } from '../subgraphs/sleeves/needlecast/saga.ts';
import { STEP_NAMES } from '../subgraphs/sleeves/needlecast/steps.ts';
import { needlecastStarter } from '../subgraphs/sleeves/needlecast/service.ts';
import needlecastRest from '../compat-rest/needlecast.ts';
import { payloadKey, parseCid } from '../subgraphs/memory/hippocampus/cid.ts';
import { residueCollector } from '../flows/worker-passes.ts';
import { listResidues } from '../subgraphs/residues/residues.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform({ NEEDLECAST_PORT: '0' });
  p.ports.hippocampus = localHippocampus(p);
  p.setEpoch(10);
});
afterAll(async () => p.cleanup());

/** A stack with one ai sleeve that perceived `n` times. */
async function setup(n: number) {
  const stack = await createStack(p, { name: 'traveller' });
  const source = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
  const cids: string[] = [];
  for (let i = 0; i < n; i++) cids.push((await perceive(p, { sleeveId: source.id, text: `memory ${i}` })).cid);
  return { stack, source, cids: cids.reverse() }; // newest first
}

/** Everything a failed saga must leave as it was. */
async function snapshot(stackId: string) {
  // A retired target stays on record as a decommissioned sleeve holding nothing: leave those out.
  const all = await p.db.prisma.sleeve.findMany({ where: { stackId }, orderBy: { seq: 'asc' } });
  const sleeves = all.filter((s) => s.alive || s.hostname === null);
  const held = await balancesOf(p.db.prisma, [poolAccount(stackId), ...all.map((s) => sleeveAccount(s.id))]);
  const balances = new Map([...held].filter(([a, b]) => a === poolAccount(stackId) || Object.values(b).some((x) => x !== 0)));
  const stack = await getStackRow(p.db.prisma, stackId);
  return {
    head: stack.episodicHead,
    sleeves: sleeves.map((s) => ({ id: s.id, alive: s.alive, frozen: s.frozen, drift: s.driftMilli })),
    balances: [...balances.entries()],
  };
}

describe('needlecast saga', () => {
  it('runs the six steps: 8 newest shards pinned, target spawned at drift 0, routing 5 + 0.1 x 8, source decommissioned', async () => {
    const { stack, source, cids } = await setup(10);
    const v = await runNeedlecast(p, { from: source.id, to: 'human' });
    expect(v).toMatchObject({ ok: true, status: 'completed', from: source.id, stackId: stack.id, route: [...STEP_NAMES] });
    expect(v.sagaId).toMatch(/^needle:[0-9a-f]{32}$/);
    expect(v.shards).toEqual(cids.slice(0, 8));
    expect(v.cost).toEqual({ routing: 5.8, memory: 8 });
    expect(v.steps.map((s) => [s.name, s.alias, s.status])).toEqual([
      ['freeze', 'FREEZE', 'done'],
      ['shard', 'SNAPSHOT and SHARD', 'done'],
      ['pin', 'TRANSMIT', 'done'],
      ['anchor', null, 'done'],
      ['reconstruct', 'REASSEMBLE', 'done'],
      ['settle', 'ACTIVATE', 'done'],
    ]);
    const target = await getSleeveRow(p.db.prisma, v.to!);
    expect(target).toMatchObject({ stackId: stack.id, embodimentType: 'human', alive: true, frozen: false, driftMilli: 0 });
    const src = await getSleeveRow(p.db.prisma, source.id);
    expect(src).toMatchObject({ alive: false, frozen: false });
    for (const cid of v.shards) expect((await hippocampusClient(p).meta(cid))!.pinned).toBe(true);
    expect((await hippocampusClient(p).meta(cids[9]!))!.pinned).toBe(false);
    // The source's tokens went to the pool after paying 5.8 routing and 8 memory.
    const pool = (await balancesOf(p.db.prisma, [poolAccount(stack.id)])).get(poolAccount(stack.id))!;
    expect(pool.routing).toBe(250 - 5.8);
    expect(pool.memory).toBe(250 - 8);
    expect((await getStackRow(p.db.prisma, stack.id)).episodicHead).toBe(cids[0]);
    const route = await p.db.prisma.chainOutbox.findFirstOrThrow({ where: { kind: 'route', ref: v.sagaId } });
    expect((route.payload as { routeHash: string }).routeHash).toBe(v.routeHash);
    expect(v.routeHash).toMatch(/^[0-9a-f]{64}$/);
    const events = await p.db.prisma.eventOutbox.findMany({ where: { subject: 'cog.needlecast.step' }, orderBy: { id: 'asc' } });
    const mine = events.map((e) => e.data as { sagaId: string; step: string; status: string }).filter((d) => d.sagaId === v.sagaId);
    expect(mine.map((d) => d.step)).toEqual(['start', ...STEP_NAMES, 'saga']);
    // Same saga id again: the same saga, nothing new.
    const again = await runNeedlecast(p, { from: source.id, to: 'human', sagaId: v.sagaId });
    expect(again).toEqual(v);
  });

  it('takes an existing sleeve of the stack as target and resets its drift', async () => {
    const { stack, source } = await setup(2);
    const target = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'memory', shape: 'A' });
    await p.db.prisma.$transaction((tx) => addDrift(tx, target.id, 7_000));
    const v = await runNeedlecast(p, { from: source.id, to: target.id });
    expect(v).toMatchObject({ ok: true, to: target.id, shards: expect.any(Array) });
    expect(v.shards).toHaveLength(2);
    expect(v.cost.routing).toBe(5.2);
    expect((await getSleeveRow(p.db.prisma, target.id)).driftMilli).toBe(0);
    expect((await listAliveSleeves(p.db.prisma, stack.id)).map((s) => s.id)).toEqual([target.id]);
  });

  for (const step of STEP_NAMES) {
    it(`compensates a failure at ${step}: nothing lost, nothing left frozen`, async () => {
      const { stack, source } = await setup(3);
      const before = await snapshot(stack.id);
      const v = await runNeedlecast(p, { from: source.id, to: 'mining' }, { failAt: step });
      expect(v).toMatchObject({ ok: false, status: 'compensated' });
      expect(v.error).toContain(step);
      const after = await snapshot(stack.id);
      expect(after).toEqual(before);
      const s = await getSaga(p, v.sagaId);
      expect(s.steps.find((x) => x.name === step)!.status).toBe('failed');
      expect(s.steps.filter((x) => x.status === 'done')).toEqual([]);
      // The source works again: a second needlecast succeeds.
      expect((await runNeedlecast(p, { from: source.id, to: 'mining' })).status).toBe('completed');
    });
  }

  it('recovers sagas left in flight: finishes one (with the epoch delta cost), compensates one that then fails', async () => {
    const a = await setup(3);
    const b = await setup(3);
    const beforeB = await snapshot(b.stack.id);
    p.setEpoch(20);
    const va = await runNeedlecast(p, { from: a.source.id, to: 'ai' }, { stopAfter: 'pin' });
    const vb = await runNeedlecast(p, { from: b.source.id, to: 'ai' }, { stopAfter: 'reconstruct' });
    expect([va.status, vb.status]).toEqual(['running', 'running']);
    expect((await getSleeveRow(p.db.prisma, a.source.id)).frozen).toBe(true);
    p.setEpoch(23); // the router was down for 3 epochs
    const done = await recoverSagas(p, {});
    expect(done.completed).toContain(va.sagaId);
    const ra = await getSaga(p, va.sagaId);
    expect(ra).toMatchObject({ status: 'completed', deltaEpoch: 3, cost: { routing: 5 + 0.3 + 1.5 } });
    // b was completed too by the same recovery; start a third one and fail it in recovery.
    const c = await setup(2);
    const beforeC = await snapshot(c.stack.id);
    const vc = await runNeedlecast(p, { from: c.source.id, to: 'human' }, { stopAfter: 'reconstruct' });
    expect(await listAliveSleeves(p.db.prisma, c.stack.id)).toHaveLength(2); // target spawned
    const rec = await recoverSagas(p, { failAt: 'settle' });
    expect(rec.compensated).toEqual([vc.sagaId]);
    expect(await snapshot(c.stack.id)).toEqual(beforeC);
    expect(beforeB.head).toBe((await getStackRow(p.db.prisma, b.stack.id)).episodicHead);
    expect(await recoverSagas(p, {})).toEqual({ completed: [], compensated: [] });
  });

  it('refuses bad requests with 4xx and changes nothing', async () => {
    const { stack, source } = await setup(1);
    const other = await setup(1);
    const before = await snapshot(stack.id);
    const sagas = await p.db.prisma.saga.count();
    await expect(runNeedlecast(p, { from: 'sleeve:ai:0:00000000', to: 'human' })).rejects.toMatchObject({ status: 404 });
    await expect(runNeedlecast(p, { from: source.id, to: 'robot' })).rejects.toMatchObject({ status: 400 });
    await expect(runNeedlecast(p, { from: source.id, to: source.id })).rejects.toMatchObject({ status: 400 });
    await expect(runNeedlecast(p, { from: source.id, to: other.source.id })).rejects.toMatchObject({ status: 403 });
    await expect(runNeedlecast(p, { from: source.id, to: 'human', sagaId: 'needle:xyz' })).rejects.toMatchObject({ status: 400 });
    await expect(runNeedlecast(p, { from: source.id, to: 'human', stackId: other.stack.id })).rejects.toMatchObject({ status: 403 });
    await p.db.prisma.$transaction((tx) =>
      burn(tx, sleeveAccount(source.id), [{ token: 'routing', milli: 246_000n }], { reason: 'test', epoch: 0, stackId: stack.id }),
    );
    await expect(runNeedlecast(p, { from: source.id, to: 'human' })).rejects.toMatchObject({
      status: 402,
      extra: { token: 'routing', required: 5.1, available: 4 },
    });
    expect(await p.db.prisma.saga.count()).toBe(sagas);
    const after = await snapshot(stack.id);
    expect(after.sleeves).toEqual(before.sleeves);
  });

  it('two concurrent needlecasts of one source: one completes, the other changes nothing', async () => {
    const { stack, source } = await setup(2);
    const results = await Promise.allSettled([runNeedlecast(p, { from: source.id, to: 'human' }), runNeedlecast(p, { from: source.id, to: 'ai' })]);
    const completed = results.filter((r) => r.status === 'fulfilled' && r.value.status === 'completed');
    expect(completed).toHaveLength(1);
    const alive = await listAliveSleeves(p.db.prisma, stack.id);
    expect(alive).toHaveLength(1);
    expect(alive[0]!.frozen).toBe(false);
  });
});

describe('shard-loss from a real cause', () => {
  it('a pinned shard of a completed needlecast that Hippocampus lost opens a 15 RT residue', async () => {
    const { source } = await setup(2);
    const v = await runNeedlecast(p, { from: source.id, to: 'ai' });
    const lost = v.shards[1]!;
    // Lost: its payload was in its index row (a perceive's), and is in no object either.
    await p.db.prisma.memoryNode.update({ where: { cid: lost }, data: { payload: null } });
    await p.objects.delete(payloadKey(parseCid(lost)!.hash));
    await residueCollector(p, p.epochs.current());
    const r = (await listResidues(p)).filter((x) => x.kind === 'shard-loss' && x.trigger.includes(lost));
    expect(r).toHaveLength(1);
    expect(r[0]).toMatchObject({ bounty: 15, status: 'open', stackId: v.stackId });
    await residueCollector(p, p.epochs.current());
    expect((await listResidues(p)).filter((x) => x.kind === 'shard-loss' && x.trigger.includes(lost))).toHaveLength(1);
  });
});

describe('router and gateway', () => {
  let router: RunningService;
  let gw: FastifyInstance;
  beforeAll(async () => {
    router = await needlecastStarter()(p);
    p.config.urls.needlecast = router.url!;
    gw = createHttp({ name: 'gw', log: p.log });
    await gw.register(needlecastRest, { platform: p });
    await gw.ready();
  });
  afterAll(async () => {
    await gw.close();
    await router.close();
  });

  it('router: {ok, sagaId, route: [step names], shards: [cids]}', async () => {
    const { source, cids } = await setup(3);
    const res = await fetch(`${router.url}/needlecast`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ from: source.id, to: 'human' }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ ok: true, route: [...STEP_NAMES], shards: cids });
    const got = await fetch(`${router.url}/needlecast/${encodeURIComponent(body.sagaId as string)}`);
    expect(await got.json()).toMatchObject({ sagaId: body.sagaId, status: 'completed' });
    expect((await fetch(`${router.url}/needlecast/needle:${'0'.repeat(32)}`)).status).toBe(404);
  });

  it('gateway Shape A and Shape B, errors passed through as problems', async () => {
    const a = await setup(2);
    const ra = await gw.inject({ method: 'POST', url: '/v1/needlecast', payload: { from: a.source.id, to: 'ai' } });
    expect(ra.statusCode).toBe(200);
    const sa = ra.json() as { ok: boolean; sagaId: string; route: string; shards: number };
    expect(sa).toMatchObject({ ok: true, shards: 2 });
    expect(sa.sagaId).toMatch(/^needle:[0-9a-f]+$/);
    const intent = await p.db.prisma.chainOutbox.findFirstOrThrow({ where: { kind: 'route', ref: sa.sagaId } });
    expect(sa.route).toBe((intent.payload as { routeHash: string }).routeHash);

    const b = await setup(4);
    const rb = await gw.inject({
      method: 'POST',
      url: '/v1/needlecast',
      payload: { stackId: b.stack.id, fromSleeveId: b.source.id, toSleeveKind: 'memory', toTickRate: 4000 },
    });
    expect(rb.statusCode).toBe(200);
    const sb = rb.json() as Record<string, unknown>;
    expect(sb).toMatchObject({ status: 'completed', from: b.source.id, cost: { routing: 5.4 }, shardsTransferred: 4 });
    expect(await getSleeveRow(p.db.prisma, sb.to as string)).toMatchObject({ embodimentType: 'memory', tickRate: 4000 });
    const state = await gw.inject({ method: 'GET', url: `/v1/needlecast/${encodeURIComponent(sb.saga as string)}` });
    expect(state.json()).toMatchObject({ sagaId: sb.saga, status: 'completed' });

    const gone = await gw.inject({ method: 'POST', url: '/v1/needlecast', payload: { from: b.source.id, to: 'ai' } });
    expect(gone.statusCode).toBe(409); // the source was decommissioned by the first needlecast
    expect(gone.headers['content-type']).toMatch(/problem\+json/);
    expect((await gw.inject({ method: 'POST', url: '/v1/needlecast', payload: { from: b.source.id } })).statusCode).toBe(400);
    expect((await gw.inject({ method: 'POST', url: '/v1/needlecast', payload: { stackId: b.stack.id, fromSleeveId: 3 } })).statusCode).toBe(400);
  });
});
