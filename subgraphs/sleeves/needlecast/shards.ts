// The shards completed needlecasts pinned: what the residue collector re-checks on the Hippocampus.
import { sql, type Db } from '../../../lib/db/index.ts';
import { jsonValue, type ReadPart } from '../../../lib/db/statement.ts';

export interface SagaShards {
  sagaId: string;
  stackId: string;
  shards: string[];
}

/** The newest `take` completed sagas with their shard CIDs, newest first. */
export async function completedSagaShards(db: Db, take: number): Promise<SagaShards[]> {
  const rows = await db.saga.findMany({
    where: { status: 'completed' },
    orderBy: { createdAt: 'desc' },
    take,
    select: { id: true, stackId: true, shards: true },
  });
  return rows.map((r) => ({ sagaId: r.id, stackId: r.stackId, shards: r.shards }));
}

/** completedSagaShards as one read of a composed statement (lib/db/statement.ts readStatement), newest first. */
export function completedSagaShardsRead(take: number): ReadPart<SagaShards[]> {
  return {
    expr: sql`SELECT json_agg(json_build_array(t.id, t."stackId", t.shards) ORDER BY t."createdAt" DESC) FROM (
        SELECT id, "stackId", shards, "createdAt" FROM "Saga" WHERE status = 'completed' ORDER BY "createdAt" DESC LIMIT ${take}) t`,
    parse: (v) => ((jsonValue(v) as [string, string, string[]][] | null) ?? []).map(([sagaId, stackId, shards]) => ({ sagaId, stackId, shards })),
  };
}
