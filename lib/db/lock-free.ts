// Locking rows without waiting for their writers: a background pass (the chain outbox settling
// mirrored records) must not queue behind request traffic that holds a row until it commits.
import type { Tx } from './index.ts';

/**
 * Locks the rows of `table` (a quoted identifier, passed by the table's owner) whose
 * key is among `ids` and that no other transaction holds (FOR UPDATE SKIP LOCKED), and tells them
 * from the ids that exist but are busy. Keys travel as text (`keyType` is the column's type).
 */
export async function lockFreeRows(
  tx: Tx,
  table: string,
  ids: string[],
  key: { column: string; type: 'text' | 'int' } = { column: 'id', type: 'text' },
): Promise<{ locked: string[]; existing: string[] }> {
  if (!ids.length) return { locked: [], existing: [] };
  const select = (lock: string) =>
    tx
      .$queryRawUnsafe<{ k: string }[]>(`SELECT ${key.column}::text AS k FROM ${table} WHERE ${key.column} = ANY($1::text[]::${key.type}[]) ${lock}`, ids)
      .then((rows) => rows.map((r) => r.k));
  const locked = await select('FOR UPDATE SKIP LOCKED');
  return { locked, existing: locked.length === ids.length ? locked : await select('') };
}
