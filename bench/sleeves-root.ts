// The fold's sleevesRoot, full recomputation (every alive Sleeve row read and hashed, as before)
// against the incremental source (flows/thalamus-sources.ts: the rows changed since the last read,
// applied to the cached tree), on PostgreSQL with V alive sleeves and k spawns plus k
// decommissions between two folds.
//   flock /tmp/cog-bench.lock npx tsx bench/sleeves-root.ts [V=100000] [k=10]
// DATABASE_URL names an empty database to use; otherwise one is made (and dropped) on
// TEST_DATABASE_URL's server.
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { openDatabase } from '../lib/db/index.ts';
import { incrementalSleevesRoot } from '../subgraphs/chains/index.ts';
import { sleevesRootOf } from '../subgraphs/chains/thalamus/coherence.ts';
import { listAliveSleeves, sleeveLeafChanges } from '../subgraphs/sleeves/index.ts';

const V = Number(process.argv[2] ?? 100_000);
const K = Number(process.argv[3] ?? 10);

async function main() {
  // An empty database of our own unless DATABASE_URL names one (then nothing is dropped).
  const fresh = process.env.DATABASE_URL ? undefined : await freshDatabase();
  const url = process.env.DATABASE_URL ?? fresh!.url;
  const drop = fresh?.drop;
  const db = await openDatabase({ databaseUrl: url, dataDir: '/tmp', poolSize: 4 });
  try {
    const prisma = db.prisma;
    await prisma.$executeRawUnsafe(`
      INSERT INTO "Sleeve" (id, "stackId", "embodimentType", shape, "tickRate")
      SELECT CASE WHEN g % 2 = 0 THEN 'sleeve:ai:' || g || ':' || substr(md5(g::text), 1, 8) ELSE 'sleeve:0x' || md5(g::text) || substr(md5((g+1)::text), 1, 8) END,
             'stack:bench', CASE g % 4 WHEN 0 THEN 'ai' WHEN 1 THEN 'human' WHEN 2 THEN 'memory' ELSE 'mining' END, 'A', 2000
      FROM generate_series(1, ${V}) g`);
    await prisma.$executeRawUnsafe('ANALYZE "Sleeve"');
    const time = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
      const t = performance.now();
      const v = await fn();
      return [v, performance.now() - t];
    };
    const full = async () => sleevesRootOf((await listAliveSleeves(prisma)).map((s) => ({ type: s.embodimentType, id: s.id })));
    const src = incrementalSleevesRoot<bigint>({
      read: async (since) => {
        const { rows, xmin } = await sleeveLeafChanges(prisma, since);
        return { rows, cursor: xmin };
      },
    });
    const [, startMs] = await time(() => src.sleevesRoot());
    console.log(`sleevesRoot over ${V.toLocaleString('en-US')} alive sleeves on PostgreSQL`);
    console.log(`  incremental source, first read (a Thalamus start): ${startMs.toFixed(0)} ms`);
    const rows: string[] = [];
    for (let round = 0; round < 5; round++) {
      const [oldRoot, fullMs] = await time(full);
      const [noChange, idleMs] = await time(() => src.sleevesRoot());
      if (noChange.root !== oldRoot) throw new Error('roots differ (no change)');
      // k spawns at random positions, k decommissions of random alive sleeves.
      const spawned = Array.from({ length: K }, () => `sleeve:0x${randomBytes(20).toString('hex')}`);
      await prisma.sleeve.createMany({ data: spawned.map((id) => ({ id, stackId: 'stack:bench', embodimentType: 'ai', shape: 'B', tickRate: 0 })) });
      await prisma.$executeRawUnsafe(`UPDATE "Sleeve" SET alive = false WHERE id IN (SELECT id FROM "Sleeve" WHERE alive ORDER BY random() LIMIT ${K})`);
      const [changed, incMs] = await time(() => src.sleevesRoot());
      const [fresh, full2Ms] = await time(full);
      if (changed.root !== fresh) throw new Error('roots differ (after changes)');
      rows.push(
        `  round ${round}: full ${fullMs.toFixed(0)} / ${full2Ms.toFixed(0)} ms; incremental: no change ${idleMs.toFixed(1)} ms, ${K}+${K} changes ${incMs.toFixed(1)} ms (${src.last.rows} rows read, re-hashed from leaf ${src.last.changedFrom})`,
      );
    }
    console.log(rows.join('\n'));
  } finally {
    await db.close();
    await drop?.();
  }
}

await main();
