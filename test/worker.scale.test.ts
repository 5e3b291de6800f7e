// The per-epoch passes cost what changed (docs/scale.md, "Per-epoch passes"): each finds only its
// due rows, so a second pass in the same state reads nothing, and on PostgreSQL with many rows
// each of their queries runs on its own index (EXPLAIN), never a scan of the table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Sql } from '../lib/db/index.ts';
import { epochAnchor, memoryReconciler, residueCollector, STALE_BATCH } from '../flows/worker-passes.ts';
import { pruneBatchQuery, type HippocampusClient } from '../subgraphs/memory/index.ts';
import { detectShardLoss, SHARD_RECHECK_EPOCHS } from '../flows/worker-memory.ts';
import {
  driftBandOf,
  freezeSleeve,
  listAliveSleevesOverDrift,
  listStaleSleeves,
  overDriftQuery,
  sleeveWritesPart,
  staleSleevesQuery,
  unfreezeSleeve,
} from '../subgraphs/sleeves/index.ts';
import { runStatement } from '../lib/db/statement.ts';
import { EXPIRY_BATCH, expireBatchQuery, expireResidues } from '../subgraphs/residues/index.ts';
import { ANCHOR_BATCH, enqueueChainTx, pendingAnchorsQuery } from '../subgraphs/chains/index.ts';
import { unmirroredHeadsQuery } from '../subgraphs/stacks/index.ts';
import { testPlatform, testPlatformOn, type TestPlatform } from './helpers/platform.ts';

const residue = (id: string, status: string, expiresAtEpoch: number) => ({
  id,
  kind: 'stale-ordering',
  trigger: 'test',
  bountyMilli: 2000,
  status,
  epoch: 1,
  expiresAtEpoch,
  evidence: {},
  dedupeKey: `test:${id}`,
});

const sleeve = (id: string, since: number, extra: Record<string, unknown> = {}) => ({
  id,
  stackId: 'stack:scale',
  embodimentType: 'ai',
  shape: 'A',
  tickRate: 2000,
  syncEpoch: since,
  spawnEpoch: 0,
  ...extra,
});

describe('passes on PGlite: each finds only its due rows', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await testPlatform();
  });
  afterAll(async () => {
    await p?.cleanup();
  });

  it('stale-ordering: a reported sleeve is not read again until it syncs or is unfrozen; more than one batch in one pass', async () => {
    const db = p.db.prisma;
    const n = STALE_BATCH + 7;
    await db.sleeve.createMany({ data: Array.from({ length: n }, (_, i) => sleeve(`sleeve:ai:${i}:stale`, 10)) });
    await db.sleeve.createMany({
      data: [sleeve('sleeve:ai:fresh', 13), sleeve('sleeve:ai:frozen', 2, { frozen: true }), sleeve('sleeve:ai:dead', 2, { alive: false })],
    });
    expect(await residueCollector(p, 14)).toMatchObject({ stale: n });
    expect(await db.residue.count({ where: { kind: 'stale-ordering' } })).toBe(n);
    const one = await db.residue.findUnique({ where: { dedupeKey: 'stale-ordering:sleeve:ai:3:stale:10' } });
    expect(one).toMatchObject({ trigger: 'sleeve sleeve:ai:3:stale is 4 epochs behind (last synced or spawned at epoch 10, epoch 14)', epoch: 14 });
    // Still stale, but reported: the next passes read none of them.
    expect(await listStaleSleeves(db, 20 - 4, STALE_BATCH)).toEqual([{ id: 'sleeve:ai:fresh', stackId: 'stack:scale', syncEpoch: 13, spawnEpoch: 0 }]);
    expect(await residueCollector(p, 20)).toMatchObject({ stale: 1 });
    expect(await listStaleSleeves(db, 30, STALE_BATCH)).toEqual([]);
    // A sync is a new epoch to be behind from; an unfrozen sleeve is checked again.
    await db.sleeve.update({ where: { id: 'sleeve:ai:3:stale' }, data: { syncEpoch: 21 } });
    await db.$transaction((tx) => unfreezeSleeve(tx, 'sleeve:ai:frozen'));
    expect((await listStaleSleeves(db, 30, STALE_BATCH)).map((s) => s.id).sort()).toEqual(['sleeve:ai:3:stale', 'sleeve:ai:frozen']);
    expect(await residueCollector(p, 24)).toMatchObject({ stale: 1 }); // the frozen one; the synced one is 3 behind
    expect(await residueCollector(p, 25)).toMatchObject({ stale: 1 });
    expect(await db.residue.findUnique({ where: { dedupeKey: 'stale-ordering:sleeve:ai:3:stale:21' } })).toMatchObject({ epoch: 25 });
    // Frozen again after its residue: nothing more for that epoch when it thaws.
    await db.$transaction((tx) => freezeSleeve(tx, 'sleeve:ai:frozen'));
    await db.$transaction((tx) => unfreezeSleeve(tx, 'sleeve:ai:frozen'));
    expect(await residueCollector(p, 26)).toMatchObject({ stale: 0 });
    expect(await db.residue.count({ where: { sleeveId: 'sleeve:ai:dead' } })).toBe(0);
  }, 120_000);

  it('residue expiry: every due open residue in batches, none before its epoch, none not open; an event each', async () => {
    const db = p.db.prisma;
    const n = EXPIRY_BATCH + 3;
    await db.residue.createMany({ data: Array.from({ length: n }, (_, i) => residue(`residue:due:${i}`, 'open', 30 + (i % 3))) });
    await db.residue.createMany({
      data: [residue('residue:later', 'open', 33), residue('residue:claimed', 'claimed', 30), residue('residue:resolved', 'resolved', 30)],
    });
    const before = await db.eventOutbox.count({ where: { msgId: { startsWith: 'residue-expired:residue:' } } });
    const expired = await expireResidues(p, 32);
    expect(expired).toHaveLength(n);
    expect(new Set(expired).size).toBe(n);
    expect(await db.residue.count({ where: { id: { startsWith: 'residue:due:' }, status: 'expired' } })).toBe(n);
    expect(
      await db.residue.findMany({
        where: { id: { in: ['residue:later', 'residue:claimed', 'residue:resolved'] } },
        select: { status: true },
        orderBy: { id: 'asc' },
      }),
    ).toEqual([{ status: 'claimed' }, { status: 'open' }, { status: 'resolved' }]);
    expect((await db.eventOutbox.count({ where: { msgId: { startsWith: 'residue-expired:residue:' } } })) - before).toBe(n);
    expect(await expireResidues(p, 32)).toEqual([]);
    expect(await expireResidues(p, 33)).toEqual(['residue:later']);
  }, 120_000);

  it('epoch-anchor: only the anchors without an intent are read; one with an intent is marked, not sent twice', async () => {
    const db = p.db.prisma;
    const roots = { crossRoot: 'a'.repeat(64), evmRoot: 'b'.repeat(64), ipfsRoot: 'c'.repeat(64), sleevesRoot: 'd'.repeat(64), btcRoot: '0'.repeat(64) };
    // 300 folds as the Thalamus stores them (the intent in the same transaction), one without its
    // intent, one whose intent is there but not marked (folded before the flag).
    await db.epochAnchor.createMany({ data: Array.from({ length: 300 }, (_, i) => ({ epoch: 1000 + i, ...roots, intentQueued: true })) });
    await db.epochAnchor.createMany({
      data: [
        { epoch: 1300, ...roots },
        { epoch: 1301, ...roots },
        { epoch: 1400, ...roots },
      ],
    });
    await db.$transaction((tx) => enqueueChainTx(tx, { kind: 'anchor', ref: 'anchor:1301', epoch: 1301, payload: { epoch: 1301, ...roots } }));
    expect(await db.$queryRaw(pendingAnchorsQuery(1301, ANCHOR_BATCH))).toHaveLength(2);
    expect(await epochAnchor(p, 1301)).toEqual({ anchored: [1300] });
    expect(await db.chainOutbox.count({ where: { kind: 'anchor', ref: { in: ['anchor:1300', 'anchor:1301'] } } })).toBe(2);
    expect(await db.$queryRaw(pendingAnchorsQuery(1301, ANCHOR_BATCH))).toEqual([]);
    expect(await epochAnchor(p, 1301)).toEqual({ anchored: [] });
    expect(await epochAnchor(p, 1400)).toEqual({ anchored: [1400] });
    expect(await db.chainOutbox.count({ where: { kind: 'anchor', ref: { startsWith: 'anchor:1' } } })).toBe(3);
  });

  it('retention pruning: one bounded batch per pass; a backlog drains over the next passes', async () => {
    const db = p.db.prisma;
    const batch = p.config.pruneBatch;
    const node = (i: number, epoch: number, pinned = false) => ({
      cid: `cog://${i.toString(16).padStart(64, '0')}@${epoch}`,
      stackId: 'stack:scale',
      epoch,
      links: [],
      pinned,
      size: 1,
    });
    await db.memoryNode.createMany({ data: Array.from({ length: 2 * batch + 5 }, (_, i) => node(i, 10 + (i % 50))) });
    await db.memoryNode.createMany({ data: [node(100_000, 5, true), node(100_001, 1995)] });
    p.setEpoch(2000); // retention 1000: epochs before 1000 go, unless pinned
    const pruned: number[] = [];
    for (let i = 0; i < 4; i++) pruned.push(((await memoryReconciler(p, 2000)) as { pruned: number }).pruned);
    expect(pruned).toEqual([batch, batch, 5, 0]);
    expect(await db.memoryNode.findMany({ where: { stackId: 'stack:scale' }, select: { epoch: true }, orderBy: { epoch: 'asc' } })).toEqual([
      { epoch: 5 },
      { epoch: 1995 },
    ]);
  });

  it('shard-loss: a shard is walked when new, then again within SHARD_RECHECK_EPOCHS, a share a pass; a lost one is found', async () => {
    const db = p.db.prisma;
    const lost = new Set<string>();
    const walked: string[] = [];
    const fake = {
      walk: async (cid: string) => {
        walked.push(cid);
        return lost.has(cid) ? { nodes: [], gated: [], missing: [cid] } : { nodes: [{ cid }], gated: [], missing: [] };
      },
      meta: async () => ({ stored: true }),
    } as unknown as HippocampusClient;
    const saga = (i: number) => ({
      id: `saga:${i}`,
      stackId: 'stack:scale',
      fromSleeveId: 'sleeve:ai:scale',
      toKind: 'ai',
      status: 'completed',
      steps: [],
      shape: 'A',
      shards: Array.from({ length: 8 }, (_, k) => `cog://${(i * 8 + k).toString(16).padStart(64, 'a')}@1`),
    });
    const had = p.ports.hippocampus;
    p.ports.hippocampus = fake;
    try {
      await db.saga.createMany({ data: Array.from({ length: 10 }, (_, i) => saga(i)) });
      const pass = async (e: number) => {
        walked.length = 0;
        const r = await detectShardLoss(p, e);
        expect(r.walked).toBe(walked.length);
        return r;
      };
      expect(await pass(100)).toEqual({ opened: 0, walked: 80 }); // every shard is new
      for (let e = 101; e < 100 + SHARD_RECHECK_EPOCHS; e++) expect((await pass(e)).walked).toBe(0);
      expect((await pass(108)).walked).toBe(10); // due again: a share of them
      await db.saga.create({ data: saga(10) });
      expect((await pass(109)).walked).toBe(8 + 11); // the new saga's shards, and a share of the 88
      // A shard lost now is found within two rounds of re-checks.
      const gone = saga(3).shards[5];
      lost.add(gone);
      let foundAt = -1;
      let walks = 0;
      for (let e = 110; e <= 110 + 2 * SHARD_RECHECK_EPOCHS && foundAt < 0; e++) {
        const r = await pass(e);
        walks += r.walked;
        if (r.opened) foundAt = e;
      }
      expect(foundAt).toBeGreaterThan(0);
      expect(await db.residue.count({ where: { dedupeKey: `shard-loss:${gone}` } })).toBe(1);
      expect(walks).toBeLessThanOrEqual((foundAt - 109) * 11);
    } finally {
      p.ports.hippocampus = had;
    }
  });
});

describe('passes on PostgreSQL: their queries run on their indexes', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await testPlatformOn('postgresql');
    const db = p.db.prisma;
    // 20,000 alive sleeves synced recently, 40 stale ones, 2,000 decommissioned.
    await db.$executeRawUnsafe(`
      INSERT INTO "Sleeve" (id, "stackId", "embodimentType", shape, "tickRate", "syncEpoch", "spawnEpoch", alive)
      SELECT 'sleeve:ai:' || g || ':' || substr(md5(g::text), 1, 8), 'stack:' || (g % 500), 'ai', 'A', 2000,
             CASE WHEN g % 500 = 0 THEN 100 ELSE 997 + g % 3 END, 0, g <= 20000
      FROM generate_series(1, 22000) g`);
    // 30,000 residues: most settled long ago, 3,000 open expiring over the next 300 epochs.
    await db.$executeRawUnsafe(`
      INSERT INTO "Residue" (id, kind, trigger, "bountyMilli", status, epoch, "expiresAtEpoch", evidence, "dedupeKey")
      SELECT 'residue:' || g, 'stale-ordering', 'fixture', 2000, CASE WHEN g % 10 = 0 THEN 'open' WHEN g % 3 = 0 THEN 'expired' ELSE 'resolved' END,
             g / 30, CASE WHEN g % 10 = 0 THEN 1000 + g % 300 ELSE g / 30 + 64 END, '{}', 'fixture:' || g
      FROM generate_series(1, 30000) g`);
    // 20,000 folded epochs with their intents, 3 without.
    await db.$executeRawUnsafe(`
      INSERT INTO "EpochAnchor" (epoch, "crossRoot", "evmRoot", "ipfsRoot", "sleevesRoot", "btcRoot", "intentQueued")
      SELECT g, md5(g::text), md5(g::text), md5(g::text), md5(g::text), md5(g::text), g < 19998 FROM generate_series(1, 20000) g`);
    // 30,000 memory nodes: 24,000 over the last 1,000 epochs, the older ones the pinned that stay
    // (and a few unpinned, due): pinned and epoch are far from independent.
    await db.$executeRawUnsafe(`
      INSERT INTO "MemoryNode" (cid, "stackId", epoch, links, pinned, size)
      SELECT 'cog://' || md5(g::text) || md5((g + 1)::text) || '@' || e, 'stack:' || (g % 500), e, '{}', e < 1999, 1
      FROM (SELECT g, CASE WHEN g % 5 = 0 THEN g / 15 ELSE 1999 + g / 30 END AS e FROM generate_series(1, 30000) g) s`);
    // 20,000 stacks, none written yet (their heads move after the statistics are taken, below).
    await db.$executeRawUnsafe(`
      INSERT INTO "Stack" (id, name, kind, shape, "pubKey", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "masterSecret")
      SELECT 'stack:human:' || g || ':' || substr(md5(g::text), 1, 8), 'fixture', 'human', 'A', 'pk:' || g, 1, 1, 1, 1, 1, 'sealed'
      FROM generate_series(1, 20000) g`);
    await db.$executeRawUnsafe('ANALYZE');
  }, 120_000);
  afterAll(async () => {
    await p?.cleanup();
  });

  /** The plan of `q` as one line of node types, index names and relations. */
  const plan = async (q: Sql) => {
    const rows = await p.db.prisma.$queryRaw<{ 'QUERY PLAN': unknown }[]>(sql`EXPLAIN (FORMAT JSON) ${q}`);
    const out: string[] = [];
    const walk = (n: Record<string, unknown>) => {
      out.push(
        [n['Node Type'], n['Index Name'] ? `using ${n['Index Name']}` : '', n['Relation Name'] ? `on ${n['Relation Name']}` : ''].filter(Boolean).join(' '),
      );
      for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
    };
    walk((rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0].Plan);
    return out.join(' > ');
  };

  it('stale-ordering: the range on "Sleeve_stale_due_idx"', async () => {
    const shown = await plan(staleSleevesQuery(1000 - 4, STALE_BATCH));
    expect(shown).toContain('using Sleeve_stale_due_idx on Sleeve');
    expect(shown).not.toContain('Seq Scan');
    expect(await listStaleSleeves(p.db.prisma, 1000 - 4, STALE_BATCH)).toHaveLength(40);
  });

  it('epoch-anchor: the anchors without an intent on "EpochAnchor_intent_pending_idx"', async () => {
    const shown = await plan(pendingAnchorsQuery(20_000, ANCHOR_BATCH));
    expect(shown).toContain('using EpochAnchor_intent_pending_idx on EpochAnchor');
    expect(shown).not.toContain('Seq Scan');
    expect(await p.db.prisma.$queryRaw(pendingAnchorsQuery(20_000, ANCHOR_BATCH))).toHaveLength(3);
  });

  it('retention pruning: the batch on "MemoryNode_unpinned_epoch_idx", deleted by primary key', async () => {
    const shown = await plan(pruneBatchQuery(2000, 500));
    expect(shown).toContain('using MemoryNode_unpinned_epoch_idx');
    expect(shown).toContain('using MemoryNode_pkey');
    expect(shown).not.toContain('Seq Scan');
  });

  it('heads mirror: the stacks whose head moved on "Stack_unmirrored_head_idx", also with statistics from before', async () => {
    // 600 heads moved since the statistics (which say none differ), 300 of them mirrored since:
    // with the comparison as the index's predicate, the planner read every stack here.
    await p.db.prisma.$executeRawUnsafe(`UPDATE "Stack" SET "episodicHead" = 'cog://' || md5(id) || '@1' WHERE "tokenId" % 33 = 0 AND "tokenId" <= 19800`);
    await p.db.prisma.$executeRawUnsafe(`UPDATE "Stack" SET "mirroredHead" = "episodicHead" WHERE "tokenId" % 66 = 0`);
    const shown = await plan(unmirroredHeadsQuery(100));
    expect(shown).toContain('using Stack_unmirrored_head_idx on Stack');
    expect(shown).not.toContain('Seq Scan');
    const all = await p.db.prisma.$queryRaw<{ stackId: string }[]>(unmirroredHeadsQuery(1000));
    expect(all).toHaveLength(300);
    const page = await p.db.prisma.$queryRaw<{ stackId: string }[]>(unmirroredHeadsQuery(100, all[99]!.stackId));
    expect(page.map((r) => r.stackId)).toEqual(all.slice(100, 200).map((r) => r.stackId));
  });

  it('drift: the sleeves over a threshold on "Sleeve_alive_driftBand_idx"; a write adding drift is a HOT update', async () => {
    const db = p.db.prisma;
    // The statistics say every drift is 0 (as after a quiet spell); 30 sleeves are far over twice the
    // maximum (15 units), 5 between once and twice, 10 just under it in the threshold's own band.
    await db.$executeRawUnsafe(`UPDATE "Sleeve" SET "driftMilli" = CASE WHEN seq <= 30 THEN 40000 WHEN seq <= 35 THEN 20000 ELSE 14000 END WHERE seq <= 45`);
    for (const above of [15_000, 30_000]) {
      const shown = await plan(overDriftQuery(above));
      expect(shown).toContain('using Sleeve_alive_driftBand_idx on Sleeve');
      expect(shown).not.toContain('Seq Scan');
    }
    expect(await listAliveSleevesOverDrift(db, 15_000)).toHaveLength(35);
    const far = await listAliveSleevesOverDrift(db, 30_000);
    expect(far.map((s) => s.driftMilli)).toEqual(Array(30).fill(40_000));
    expect(far.map((s) => s.seq)).toEqual([...far.map((s) => s.seq)].sort((a, b) => a - b));
    // The band as the column computes it, at the edges of the powers of two.
    const edges = [-5, 0, 1, 2, 3, 1023, 1024, 1025, 14_999, 15_000, 30_001, 2 ** 30 - 1, 2 ** 30, 2 ** 31 - 1];
    const bands = await db.$queryRawUnsafe<{ v: number; b: number }[]>(
      `SELECT v, width_bucket(v, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) AS b FROM unnest($1::int[]) v`,
      edges,
    );
    expect(bands.map((r) => r.b)).toEqual(edges.map(driftBandOf));
    // One sleeve in every few pages, its drift already in a band: the write path's drift and head
    // update leaves every index as it was, so the row's new version is a heap-only tuple.
    await db.$executeRawUnsafe(`UPDATE "Sleeve" SET "driftMilli" = 5000 WHERE seq % 100 = 50 AND alive`);
    const ids = (await db.$queryRawUnsafe<{ id: string }[]>(`SELECT id FROM "Sleeve" WHERE seq % 100 = 50 AND alive`)).map((r) => r.id);
    expect(ids).toHaveLength(200);
    // The backend's counts not yet flushed to the shared statistics: read before and after, in one transaction.
    const counts = (tx: Parameters<Parameters<typeof db.$transaction>[0]>[0]) =>
      tx.$queryRawUnsafe<{ upd: number; hot: number }[]>(
        `SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_xact_user_tables WHERE relname = 'Sleeve'`,
      );
    const { upd, hot } = await db.$transaction(async (tx) => {
      const [before] = await counts(tx);
      await runStatement(tx, [sleeveWritesPart(ids.map((sleeveId) => ({ sleeveId, head: `cog://${sleeveId}`, driftMilli: 1000 })))!]);
      const [after] = await counts(tx);
      return { upd: after!.upd - before!.upd, hot: after!.hot - before!.hot };
    });
    expect(upd).toBe(200);
    // On the index of driftMilli itself none was (a new entry in each of the table's indexes).
    expect(hot).toBeGreaterThanOrEqual(190);
  });

  it('residue expiry: the due open residues on "Residue_open_expiresAtEpoch_idx"', async () => {
    const shown = await plan(expireBatchQuery(1005, EXPIRY_BATCH));
    expect(shown).toContain('using Residue_open_expiresAtEpoch_idx on Residue');
    expect(shown).toContain('using Residue_pkey');
    expect(shown).not.toContain('Join');
    expect(shown).not.toContain('Seq Scan');
  });
});
