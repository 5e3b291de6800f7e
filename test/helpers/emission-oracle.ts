// The per-epoch emission the Treasury wrote before it accrued in closed form (one Emission row
// per stack per epoch): kept as the oracle of the closed form's property test. Its amounts are the
// statement the emitter ran as each epoch began, over every stack's lastActiveEpoch at that moment
// (the economy's, in EmissionAccrual) and the CPV and binding the stack itself holds.
import type { Db } from '../../lib/db/index.ts';

export interface OracleEmission {
  compute: bigint;
  memory: bigint;
  sync: bigint;
  routing: bigint;
  ebcFactor: number;
}

/** The emission of epoch `epoch` for each of `stackIds`, as the per-epoch emitter computed it. */
export async function perEpochEmission(db: Db, epoch: number, stackIds: string[]): Promise<Map<string, OracleEmission>> {
  const rows = await db.$queryRawUnsafe<{ id: string; c: bigint; mm: bigint; sy: bigint; r: bigint; ebc: number }[]>(
    `WITH s AS (
      SELECT st.id, st."computeCoeff", st."memoryCoeff", st."syncCoeff", st."routingCoeff", st."residueCoeff",
        GREATEST(st."bindingFloor", EXP(-st."bindingDecay" * GREATEST(0, $1::int - 1 - a."lastActiveEpoch"))) AS ebc
      FROM "Stack" st JOIN "EmissionAccrual" a ON a."stackId" = st.id WHERE st.id = ANY($2::text[])
    ), m AS (
      SELECT s.*, ROUND(${100 * 1000} * "computeCoeff" * ebc)::bigint AS c,
        ROUND(${100 * 1000} * "memoryCoeff" * ebc)::bigint AS mm,
        ROUND(${100 * 1000} * "syncCoeff" * ebc)::bigint AS sy,
        ROUND(${100 * 1000} * "routingCoeff" * ebc)::bigint AS r
      FROM s
    )
    SELECT id, c, mm, sy, r, ebc FROM m`,
    epoch,
    stackIds,
  );
  return new Map(rows.map((r) => [r.id, { compute: BigInt(r.c), memory: BigInt(r.mm), sync: BigInt(r.sy), routing: BigInt(r.r), ebcFactor: Number(r.ebc) }]));
}
