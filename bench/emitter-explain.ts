// The treasury-emitter's statements on PostgreSQL at size (docs/scale.md, "Per-epoch passes"):
// EXPLAIN (ANALYZE, BUFFERS) of what the pass runs each epoch, against the statements it replaced,
// over S stacks of which A were active in each of the last 30 epochs (the scale bench's shape:
// the accrual rows as openAccrual writes them, the activity as markActive leaves it), then one
// emitEpoch through the economy's door with its time.
//   flock /tmp/cog-bench.lock npx tsx bench/emitter-explain.ts [stacks=100000] [active=1000]
// DATABASE_URL names an empty database to use; otherwise one is made (and dropped) on
// TEST_DATABASE_URL's server.
import { freshDatabase } from '../test/helpers/postgres.ts';
import { openDatabase, sql, type Sql } from '../lib/db/index.ts';
import { numberedSql } from '../lib/db/statement.ts';
import { amountSql, ACCRUAL_TOKENS, tailSql, termsKeySql } from '../subgraphs/economy/accrual.ts';
import { emitterStatements } from '../subgraphs/economy/treasury.ts';
import { testPlatform } from '../test/helpers/platform.ts';
import { emitEpoch } from '../subgraphs/economy/index.ts';

const S = Number(process.argv[2] ?? 100_000);
const A = Number(process.argv[3] ?? 1000);
/** The epoch the pass runs for; activity in the 30 before it. */
const E = 10_000;
const WINDOW = 30;

async function main() {
  const fresh = process.env.DATABASE_URL ? undefined : await freshDatabase();
  const url = process.env.DATABASE_URL ?? fresh!.url;
  const db = await openDatabase({ databaseUrl: url, dataDir: '/tmp', poolSize: 2 });
  const x = (s: string) => db.prisma.$executeRawUnsafe(s);
  try {
    const t0 = performance.now();
    // Stacks created at epoch 0, never active since (at their floor long ago), tallied; the scale
    // bench's CPV mix.
    await x(`INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "bindingFloor", "bindingDecay",
        "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch", tallied)
      SELECT 'stack:human:' || g || ':' || substr(md5(g::text), 1, 8), 1, 0.5 + (g % 3) * 0.5, 1, 1, 2 - (g % 5) * 0.25, 0.25, 0.05, 0, 1, 0, 0, true
      FROM generate_series(1, ${S}) g`);
    await x(`UPDATE "EmissionAccrual" s SET "floorEpoch" = 1 + ${tailSql}`);
    // A stacks active in each of the 30 epochs before E, as markActive leaves them: a closed run and
    // the accrual row moved (settled sums left out: the emitter does not read them).
    const step = Math.max(1, Math.floor(S / A));
    const activity = async (e: number) => {
      const pick = `split_part("stackId", ':', 3)::int % ${step} = ${e % step} AND split_part("stackId", ':', 3)::int <= ${step * A}`;
      await x(`INSERT INTO "EmissionRun" ("stackId", "fromEpoch", "toEpoch", "lastActiveEpoch")
        SELECT "stackId", GREATEST("lastActiveEpoch" + 1, "sinceEpoch"), ${e}, "lastActiveEpoch" FROM "EmissionAccrual" WHERE ${pick}`);
      await x(`UPDATE "EmissionAccrual" s SET "lastActiveEpoch" = ${e}, "settledEpoch" = ${e}, "floorEpoch" = ${e} + 1 + ${tailSql} WHERE ${pick}`);
    };
    for (let e = E - WINDOW; e < E; e++) await activity(e);
    // The emitter's state as of E - 1 (its running sums are not checked here).
    await x(`INSERT INTO "EmissionEpoch" (epoch, stacks, "floorCompute", "floorMemory", "floorSync", "floorRouting", compute, memory, sync, routing)
      VALUES (${E - 1}, ${S}, 0, 0, 0, 0, 0, 0, 0, 0)`);
    await prepareEmitter(x);
    await x('VACUUM ANALYZE');
    const [near] = await db.prisma.$queryRawUnsafe<{ n: number; cohorts: number }[]>(
      `SELECT (SELECT count(*)::int FROM "EmissionAccrual" WHERE "floorEpoch" > ${E}) AS n, (SELECT count(*)::int FROM "EmissionCohort") AS cohorts`,
    );
    console.log(
      `${S.toLocaleString('en-US')} stacks, ${A.toLocaleString('en-US')} active an epoch over the last ${WINDOW}: ${near!.n.toLocaleString('en-US')} not at their floor at epoch ${E}, in ${near!.cohorts} cohorts (fixtures ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
    );

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
    for (const [title, q] of emitterStatements(E)) await explain(title, q);
    const floors = ACCRUAL_TOKENS.map(([t, coeff]) => `COALESCE(SUM(${amountSql(coeff, tailSql)}), 0)::text AS ${t}`).join(', ');
    await explain(
      'before: the new stacks join the floor sums',
      numberedSql(
        `WITH t AS (UPDATE "EmissionAccrual" a SET tallied = true WHERE NOT a.tallied AND a."sinceEpoch" <= $1::int RETURNING a.*) SELECT COUNT(*)::text AS n, ${floors} FROM t s`,
        [E],
      ),
    );
    const nearSum = ACCRUAL_TOKENS.map(([t, coeff]) => `COALESCE(SUM(${amountSql(coeff, 'x.d')} - ${amountSql(coeff, tailSql)}), 0)::text AS ${t}`).join(', ');
    await explain(
      'before: every stack not at its floor, one by one',
      numberedSql(
        `SELECT COUNT(*)::text AS n, ${nearSum} FROM "EmissionAccrual" s
       CROSS JOIN LATERAL (SELECT $1::int - 1 - COALESCE((SELECT r."lastActiveEpoch" FROM "EmissionRun" r
         WHERE r."stackId" = s."stackId" AND r."toEpoch" >= $1::int AND r."fromEpoch" <= $1::int ORDER BY r."toEpoch" LIMIT 1), s."lastActiveEpoch") AS d) x
       WHERE s."floorEpoch" > $1::int AND s.tallied AND s."sinceEpoch" <= $1::int`,
        [E],
      ),
    );
    // The pass itself, through the economy's door, for five epochs with A stacks active in each.
    const p = await testPlatform({ DATABASE_URL: url });
    try {
      console.log('');
      for (let e = E; e < E + 5; e++) {
        const t1 = performance.now();
        const r = await emitEpoch(p, e);
        console.log(`emitEpoch(${e}): ${(performance.now() - t1).toFixed(1)} ms ${JSON.stringify(r)}`);
        await activity(e);
      }
    } finally {
      await p.cleanup();
    }
  } finally {
    await db.close();
    await fresh?.drop();
  }
}

/**
 * The emitter's state after its epoch E - 1: the runs closed before it counted, each tallied stack
 * in the cohort of its lastActiveEpoch before its first run not counted (as the migration
 * emission_cohorts builds them, there with every run uncounted).
 */
async function prepareEmitter(x: (s: string) => Promise<number>): Promise<void> {
  await x(`UPDATE "EmissionRun" SET counted = true WHERE "toEpoch" < ${E - 1}`);
  await x(`INSERT INTO "EmissionCohort" (terms, "lastActiveEpoch", "computeCoeff", "memoryCoeff", "syncCoeff", "routingCoeff", "bindingFloor", "bindingDecay", stacks)
    SELECT ${termsKeySql}, COALESCE((SELECT r."lastActiveEpoch" FROM "EmissionRun" r WHERE r."stackId" = s."stackId" AND NOT r.counted ORDER BY r."toEpoch" LIMIT 1), s."lastActiveEpoch"),
      s."computeCoeff", s."memoryCoeff", s."syncCoeff", s."routingCoeff", s."bindingFloor", s."bindingDecay", count(*)
    FROM "EmissionAccrual" s WHERE s.tallied GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`);
  await x(`DELETE FROM "EmissionCohort" s WHERE s."lastActiveEpoch" + 1 + ${tailSql} <= ${E - 1}`);
}

await main();
