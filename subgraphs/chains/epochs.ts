// The chains context's answers about the current epoch and manual mining, shared by the /v1 routes
// (compat-rest/chains.ts) and the chains subgraph (resolvers.ts). Medulla is internal: every call
// carries the platform's internal token. And the check a write stamped with an epoch makes in its
// own statement, out of Medulla's process (epochCurrentPart).
import { sql, type Database } from '../../lib/db/index.ts';
import type { StatementPart } from '../../lib/db/statement.ts';
import { unavailable } from '../../lib/errors.ts';
import type { EpochInfo } from '../../lib/epoch.ts';
import type { Platform } from '../../lib/platform.ts';
import { getBlock, medullaRpc, type ChainInfo } from './medulla/client.ts';
import type { Block } from './medulla/header.ts';

/** Medulla's chain info; when Medulla does not answer, the last epoch announced on the bus (difficulty null). */
export async function currentEpochInfo(p: Platform): Promise<EpochInfo & { difficulty: number | null }> {
  try {
    const { epoch, height, tip, difficulty } = await medullaRpc<ChainInfo>(p.config.urls.medulla, 'getinfo', [], {
      timeoutMs: 2000,
      token: p.config.internalToken,
    });
    p.epochs.observe({ epoch, height, tip });
    return { epoch, height, tip, difficulty };
  } catch {
    return { ...p.epochs.info(), difficulty: null };
  }
}

/**
 * Mines one block on Medulla now; 503 (retry in 2 s) when it cannot. This process takes the new epoch
 * at once (the bus event follows): a client that mines and then recalls through the same gateway reads
 * at the epoch it just made.
 */
export async function mineBlockNow(p: Platform): Promise<Block> {
  let b: Block;
  try {
    b = await medullaRpc<Block>(p.config.urls.medulla, 'mineblock', [], { timeoutMs: 120_000, token: p.config.internalToken });
  } catch (e) {
    throw unavailable(`Medulla could not mine a block: ${(e as Error).message}`, 2);
  }
  p.epochs.observe({ epoch: b.epoch, height: b.height, tip: b.blockHash });
  return b;
}

/** The block at a height (Medulla's RPC errors as MedullaRpcError). */
export const blockAtHeight = (p: Platform, height: number): Promise<Block> => getBlock(p.config.urls.medulla, height, p.config.internalToken);

/**
 * A write stamped with `epoch` in a process that follows the epoch through the bus, as a check of
 * its own statement: no block of a later epoch is on a main chain. Medulla stores a block and its
 * `cog.epoch.advanced` event in one transaction, so the database knows a block no later than the
 * bus does; a write that heard of it late fails the check (`behind`), changing nothing, and is
 * stamped again (newestStoredEpoch). One index probe in a statement the write makes anyway, where
 * asking Medulla was an RPC before every batch of writes.
 */
export function epochCurrentPart(epoch: number, behind: () => Error): StatementPart {
  return { checks: [{ holds: sql`NOT EXISTS (SELECT 1 FROM "MedullaBlock" WHERE epoch > ${epoch}::int AND "onMain")`, fail: behind }] };
}

/** The newest block on a main chain in the database (any node's), as epoch info; null before the first. */
export async function newestStoredEpoch(db: Database): Promise<EpochInfo | null> {
  const q = sql`SELECT epoch, height, hash FROM "MedullaBlock" WHERE "onMain" ORDER BY epoch DESC, height DESC LIMIT 1`;
  const [row] = await db.driver.query<{ epoch: number; height: number; hash: string }>(q.text, q.values);
  return row ? { epoch: row.epoch, height: row.height, tip: row.hash } : null;
}
