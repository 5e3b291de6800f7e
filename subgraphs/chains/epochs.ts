// The chains context's answers about the current epoch and manual mining, shared by the /v1 routes
// (compat-rest/chains.ts) and the chains subgraph (resolvers.ts). Medulla is internal: every call
// carries the platform's internal token.
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
