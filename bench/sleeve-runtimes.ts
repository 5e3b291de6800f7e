// Sleeve runtimes sharing the sleeves by leases (docs/scale.md): V alive sleeves inserted in bulk
// on PostgreSQL, R runtimes in this process over them (one timer wheel and one identity listener
// each), running for S seconds. Prints how long the runtimes took to split the sleeves, each
// one's share, the ticks per second, the wheel's tick lateness (p99, max) against the tick period,
// and the time of a lease round (heartbeat, renew, counts, claim or release).
//   flock /tmp/cog-bench.lock npx tsx bench/sleeve-runtimes.ts [V=5000] [R=2] [S=16] [tickRate=8000]
// DATABASE_URL names an empty database to use; otherwise one is made (and dropped) on
// TEST_DATABASE_URL's server.
import { testPlatform } from '../test/helpers/platform.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { startRuntime, type SleeveRuntime } from '../subgraphs/sleeves/runtime/runtime.ts';

const V = Number(process.argv[2] ?? 5000);
const R = Number(process.argv[3] ?? 2);
const S = Number(process.argv[4] ?? 16);
const RATE = Number(process.argv[5] ?? 8000);
const LEASE_MS = 4000;

async function main() {
  const fresh = process.env.DATABASE_URL ? undefined : await freshDatabase();
  const p = await testPlatform({ DATABASE_URL: process.env.DATABASE_URL ?? fresh!.url });
  const rts: SleeveRuntime[] = [];
  try {
    await p.db.prisma.$executeRawUnsafe(`
      INSERT INTO "Sleeve" (id, "stackId", "embodimentType", shape, "tickRate")
      SELECT 'sleeve:human:' || g || ':' || substr(md5(g::text), 1, 8), 'stack:bench', 'human', 'A', ${RATE} FROM generate_series(1, ${V}) g`);
    await p.db.prisma.$executeRawUnsafe('ANALYZE "Sleeve"; ANALYZE "SleeveLease"');
    const t0 = performance.now();
    for (let i = 0; i < R; i++) rts.push(await startRuntime(p, { id: `bench-${i}`, leaseMs: LEASE_MS, reconcileMs: 60_000 }));
    const split = async () => rts.every((rt) => Math.abs(rt.running().length - V / R) <= 1) && rts.reduce((n, rt) => n + rt.running().length, 0) === V;
    while (!(await split())) {
      if (performance.now() - t0 > 60_000) throw new Error('the runtimes did not split the sleeves in 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const splitMs = performance.now() - t0;
    // The window starts half a tick period after the split, so the sleeves claimed at the split (all
    // due at once) do not tick on its edges; S a multiple of the period gives S / period ticks each.
    await new Promise((r) => setTimeout(r, RATE / 2));
    const before = rts.map((rt) => rt.stats());
    const t1 = performance.now();
    await new Promise((r) => setTimeout(r, S * 1000));
    const secs = (performance.now() - t1) / 1000;
    console.log(`${V.toLocaleString('en-US')} sleeves (tick every ${RATE} ms) across ${R} runtimes on PostgreSQL, ${S} s`);
    console.log(`  split ${rts.map((rt) => rt.running().length).join(' / ')} after ${splitMs.toFixed(0)} ms (leases ${LEASE_MS} ms)`);
    for (const [i, rt] of rts.entries()) {
      const st = rt.stats();
      console.log(
        `  ${rt.id}: ${((st.ticks - before[i]!.ticks) / secs).toFixed(0)} ticks/s (expected ${((rt.running().length * 1000) / RATE).toFixed(0)}), lateness p99 ${st.lateP99Ms.toFixed(0)} ms, max ${st.maxLateMs.toFixed(0)} ms, failures ${st.failures}, refused by the lease ${st.fenced}, skipped busy ${st.busy}`,
      );
    }
    const leases = await p.db.prisma.$queryRawUnsafe<{ runtime: string; n: number; ms: number | null }[]>(
      `SELECT l.runtime, count(*)::int AS n, (EXTRACT(EPOCH FROM min(b."expiresAt") - now()) * 1000)::int AS ms
       FROM "SleeveLease" l LEFT JOIN "SleeveRuntimeBeat" b ON b.id = l.runtime AND b.gen = l.gen GROUP BY l.runtime ORDER BY l.runtime`,
    );
    console.log(`  leases: ${leases.map((l) => `${l.runtime || '(unheld)'} ${l.n}${l.ms === null ? '' : `, beat expires in ${l.ms} ms`}`).join('; ')}`);
    for (const [i, rt] of rts.entries()) {
      const st = rt.stats();
      const n = st.rounds - before[i]!.rounds;
      console.log(`  ${rt.id}: ${n} lease rounds, ${((st.roundMs - before[i]!.roundMs) / Math.max(1, n)).toFixed(1)} ms each on average`);
    }
  } finally {
    for (const rt of rts) await rt.close().catch(() => {});
    await p.cleanup();
    await fresh?.drop();
  }
}

await main();
