// Treasury emission for many stacks in one epoch, against the epoch length.
//   npx tsx bench/emission.ts [stacks=10000]
// Stacks are bulk-inserted as fixtures (the bench measures emitEpoch, not stack creation). Emission
// accrues in closed form: the first epoch adds every stack to the running sums once (firstMs), each
// later one computes only the stacks not at their floor (emitMs, the steady state).
import { pathToFileURL } from 'node:url';
import { testPlatform } from '../test/helpers/platform.ts';
import { emitEpoch, tailSql } from '../subgraphs/economy/index.ts';

export interface EmissionBenchResult {
  stacks: number;
  emitMs: number;
  epochMs: number;
  /** emitMs / epochMs: below 1 means one epoch's emission fits inside the epoch. */
  fractionOfEpoch: number;
  replayMs: number;
  /** The first epoch after the stacks appeared: each joins the running sums once. */
  firstMs: number;
  /** Stacks computed one by one in the steady-state epoch (active in the last ~28 epochs). */
  computed: number;
}

export async function runEmissionBench(opts: { stacks?: number } = {}): Promise<EmissionBenchResult> {
  const stacks = opts.stacks ?? 10_000;
  const p = await testPlatform();
  try {
    await p.db.prisma.$executeRawUnsafe(`
      INSERT INTO "Stack" (id, name, kind, shape, "pubKey", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "masterSecret")
      SELECT 'stack:bench:' || g, 'bench ' || g, 'human', 'A', md5(g::text) || md5('k' || g::text), 1, 0.5 + (g % 3) * 0.5, 1, 1, 2 - (g % 5) * 0.25, 'sealed'
      FROM generate_series(1, ${stacks}) AS g`);
    // Their accrual rows as openAccrual writes them, each last active in epoch g % 40.
    await p.db.prisma.$executeRawUnsafe(`
      INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "bindingFloor", "bindingDecay",
        "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch")
      SELECT s.id, s."syncCoeff", s."memoryCoeff", s."computeCoeff", s."residueCoeff", s."routingCoeff", s."bindingFloor", s."bindingDecay",
        s.l, s.l + 1, s.l, s.l + 1 + ${tailSql}
      FROM (SELECT *, substring(id FROM 13)::int % 40 AS l FROM "Stack") s`);
    const f0 = performance.now();
    await emitEpoch(p, 49);
    const firstMs = performance.now() - f0;
    const epoch = 50;
    p.setEpoch(epoch);
    const t0 = performance.now();
    const r = await emitEpoch(p, epoch);
    const emitMs = performance.now() - t0;
    if (r.stacks !== stacks) throw new Error(`emitted ${r.stacks} of ${stacks}`);
    const t1 = performance.now();
    await emitEpoch(p, epoch); // idempotent replay: nothing new
    const replayMs = performance.now() - t1;
    return {
      stacks,
      emitMs,
      epochMs: p.config.epochIntervalMs,
      fractionOfEpoch: emitMs / p.config.epochIntervalMs,
      replayMs,
      firstMs,
      computed: r.computed ?? 0,
    };
  } finally {
    await p.cleanup();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await runEmissionBench({ stacks: Number(process.argv[2] ?? 10_000) });
  console.log(
    `emission: ${r.stacks} stacks in ${r.emitMs.toFixed(0)} ms = ${(r.fractionOfEpoch * 100).toFixed(1)}% of a ${r.epochMs} ms epoch (${r.computed} computed one by one; replay ${r.replayMs.toFixed(0)} ms; first epoch, every stack joining the sums: ${r.firstMs.toFixed(0)} ms)`,
  );
}
