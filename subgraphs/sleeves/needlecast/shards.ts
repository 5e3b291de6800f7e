// The shards completed needlecasts pinned: what the residue collector re-checks on the Hippocampus.
import { sql, type Database, type Db } from '../../../lib/db/index.ts';
import { jsonValue, readStatement, type ReadPart } from '../../../lib/db/statement.ts';

export interface SagaShards {
  sagaId: string;
  stackId: string;
  shards: string[];
}

/** The newest `take` completed sagas with their shard CIDs, newest first. */
export async function completedSagaShards(db: Database | Db, take: number): Promise<SagaShards[]> {
  return (await readStatement(db, { sagas: completedSagaShardsRead(take) })).sagas;
}

/** completedSagaShards as one read of a composed statement (lib/db/statement.ts readStatement), newest first. */
export function completedSagaShardsRead(take: number): ReadPart<SagaShards[]> {
  return {
    expr: sql`SELECT json_agg(json_build_array(t.id, t."stackId", t.shards) ORDER BY t."createdAt" DESC) FROM (
        SELECT id, "stackId", shards, "createdAt" FROM "Saga" WHERE status = 'completed' ORDER BY "createdAt" DESC LIMIT ${take}) t`,
    parse: (v) => ((jsonValue(v) as [string, string, string[]][] | null) ?? []).map(([sagaId, stackId, shards]) => ({ sagaId, stackId, shards })),
  };
}
