// The shards completed needlecasts pinned: what the residue collector re-checks on the Hippocampus.
import type { Db } from '../../../lib/db/index.ts';

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
