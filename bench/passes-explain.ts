// The per-epoch passes' queries on PostgreSQL with many rows (docs/scale.md, "Per-epoch passes"):
// EXPLAIN (ANALYZE, BUFFERS) of each, after the code's own statements (the ones the passes run),
// against the statements they replaced.
//   flock /tmp/cog-bench.lock npx tsx bench/passes-explain.ts [scale=1]
// scale 1: 200,000 sleeves, 100,000 residues, 100,000 folded epochs, 200,000 memory nodes.
// DATABASE_URL names an empty database to use; otherwise one is made (and dropped) on
// TEST_DATABASE_URL's server.
import { freshDatabase } from '../test/helpers/postgres.ts';
import { openDatabase, sql, type Sql } from '../lib/db/index.ts';
import { pendingAnchorsQuery } from '../subgraphs/chains/index.ts';
import { pruneBatchQuery } from '../subgraphs/memory/index.ts';
import { expireBatchQuery } from '../subgraphs/residues/index.ts';
import { staleSleevesQuery } from '../subgraphs/sleeves/index.ts';

const k = Number(process.argv[2] ?? 1);

async function main() {
  // An empty database of our own unless DATABASE_URL names one (then nothing is dropped).
  const fresh = process.env.DATABASE_URL ? undefined : await freshDatabase();
  const url = process.env.DATABASE_URL ?? fresh!.url;
  const drop = fresh?.drop;
  const db = await openDatabase({ databaseUrl: url, dataDir: '/tmp', poolSize: 2 });
  const x = (s: string) => db.prisma.$executeRawUnsafe(s);
  try {
    const S = 200_000 * k;
    const R = 100_000 * k;
    const E = 100_000 * k;
    const M = 200_000 * k;
    // Epoch 10,000 now. Sleeves: 1 in 1,000 stale (synced at 100), the rest synced in the last 3
    // epochs, 1 in 10 decommissioned long ago.
    await x(`INSERT INTO "Sleeve" (id, "stackId", "embodimentType", shape, "tickRate", "syncEpoch", "spawnEpoch", alive)
      SELECT 'sleeve:ai:' || g || ':' || substr(md5(g::text), 1, 8), 'stack:' || (g % 5000), 'ai', 'A', 2000,
             CASE WHEN g % 1000 = 0 THEN 100 ELSE 9997 + g % 3 END, 0, g % 10 <> 0
      FROM generate_series(1, ${S}) g`);
    // The leaf stamps: all old but the 20 newest changes.
    await x(`UPDATE "Sleeve" SET "leafXid" = 1000 WHERE "leafXid" IS NOT NULL`);
    await x(`UPDATE "Sleeve" SET alive = false WHERE id IN (SELECT id FROM "Sleeve" WHERE alive ORDER BY id LIMIT 20)`);
    // Residues: 1 in 20 open, expiring over the next 100 epochs; the rest settled.
    await x(`INSERT INTO "Residue" (id, kind, trigger, "bountyMilli", status, epoch, "expiresAtEpoch", evidence, "dedupeKey")
      SELECT 'residue:' || g, 'stale-ordering', 'fixture', 2000, CASE WHEN g % 20 = 0 THEN 'open' WHEN g % 3 = 0 THEN 'expired' ELSE 'resolved' END,
             g / 10, CASE WHEN g % 20 = 0 THEN 10000 + g % 100 ELSE g / 10 + 100 END, '{}', 'fixture:' || g
      FROM generate_series(1, ${R}) g`);
    // Folded epochs, each with its anchor intent; the newest one not yet.
    await x(`INSERT INTO "EpochAnchor" (epoch, "crossRoot", "evmRoot", "ipfsRoot", "sleevesRoot", "btcRoot", "intentQueued")
      SELECT g, md5(g::text), md5(g::text), md5(g::text), md5(g::text), md5(g::text), g < ${E} FROM generate_series(1, ${E}) g`);
    await x(`INSERT INTO "ChainOutbox" (kind, ref, payload, status, epoch, "updatedAt")
      SELECT 'anchor', 'anchor:' || g, '{}', 'confirmed', g, now() FROM generate_series(1, ${E} - 1) g`);
    // Memory: nodes over the 1,000 epochs of the retention window (epochs 9,000 to 9,999), and the
    // pinned ones of the 8,000 epochs before, with one epoch's worth (200) now past the window.
    await x(`INSERT INTO "MemoryNode" (cid, "stackId", epoch, links, pinned, size)
      SELECT 'cog://' || md5(g::text) || md5((g + 1)::text) || '@' || e, 'stack:' || (g % 5000), e, '{}', e < 8999, 1
      FROM (SELECT g, CASE WHEN g % 5 = 0 THEN g / 25 ELSE 8999 + (g * 1001) / ${M} END AS e FROM generate_series(1, ${M}) g) s`);
    await x('VACUUM ANALYZE');

    const explain = async (title: string, q: Sql) => {
      // In a transaction rolled back: EXPLAIN ANALYZE runs the statement.
      const lines: string[] = [];
      await db.prisma
        .$transaction(async (tx) => {
          const rows = await tx.$queryRaw<{ 'QUERY PLAN': string }[]>(sql`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${q}`);
          lines.push(...rows.map((r) => r['QUERY PLAN']));
          throw new Error('rollback');
        })
        .catch((e) => {
          if ((e as Error).message !== 'rollback') throw e;
        });
      console.log(`\n## ${title}\n${lines.join('\n')}`);
    };
    console.log(`${S} sleeves, ${R} residues, ${E} folded epochs, ${M} memory nodes; epoch 10000`);
    await explain(
      'sleevesRoot: the sleeves changed since the last read (sleeveLeafChanges)',
      sql`SELECT id, "embodimentType", alive FROM "Sleeve" WHERE "leafXid" >= ${1001n}`,
    );
    await explain('sleevesRoot before: every alive sleeve (listAliveSleeves)', sql`SELECT * FROM "Sleeve" WHERE alive ORDER BY seq`);
    await explain('stale-ordering (staleSleevesQuery)', staleSleevesQuery(10000 - 4, 500));
    await explain('stale-ordering before: every alive sleeve', sql`SELECT * FROM "Sleeve" WHERE alive ORDER BY seq`);
    await explain('residue expiry (expireBatchQuery)', expireBatchQuery(10010, 500));
    await explain('residue expiry before', sql`UPDATE "Residue" SET status = 'expired' WHERE status = 'open' AND "expiresAtEpoch" <= ${10010} RETURNING id`);
    await explain('epoch-anchor (pendingAnchorsQuery)', pendingAnchorsQuery(E, 1000));
    await explain(
      'epoch-anchor before: the anti-join',
      sql`SELECT a.epoch FROM "EpochAnchor" a WHERE a.epoch <= ${E} AND NOT EXISTS (SELECT 1 FROM "ChainOutbox" o WHERE o.kind = 'anchor' AND o.ref = 'anchor:' || a.epoch) ORDER BY a.epoch LIMIT 1000`,
    );
    await explain('retention pruning (pruneBatchQuery)', pruneBatchQuery(9000, 500));
    await explain(
      'retention pruning before (one of its batches)',
      sql`DELETE FROM "MemoryNode" WHERE cid IN (SELECT cid FROM "MemoryNode" WHERE pinned = false AND epoch < ${9000} LIMIT 500) AND pinned = false RETURNING cid`,
    );
  } finally {
    await db.close();
    await drop?.();
  }
}

await main();
