// Chains subgraph resolvers: the current epoch, Medulla blocks and manual mining, all through the
// chains context's epoch module (epochs.ts) the /v1 chains routes use too.
import type { GqlContext } from '../../lib/graphql.ts';
import { guarded, health, loader } from '../../lib/graphql.ts';
import { badRequest, unavailable } from '../../lib/errors.ts';
import type { Platform } from '../../lib/platform.ts';
import { MedullaRpcError } from './medulla/client.ts';
import { blockAtHeight, currentEpochInfo, mineBlockNow } from './epochs.ts';
import type { Block } from './medulla/header.ts';
import { coherenceTuples, recentBlocks, servicesHealth } from './inspect.ts';

const RPC_NOT_FOUND = -32004;
const RPC_INVALID_PARAMS = -32602;

/** The main-chain block at a height, or null; RPC failures as Problems. */
async function blockAt(p: Platform, height: number): Promise<Block | null> {
  if (!Number.isInteger(height) || height < 0) throw badRequest('height must be a non-negative integer', [{ path: 'height', message: 'is negative' }]);
  try {
    return await blockAtHeight(p, height);
  } catch (e) {
    if (e instanceof MedullaRpcError && e.code === RPC_NOT_FOUND) return null;
    if (e instanceof MedullaRpcError && e.code === RPC_INVALID_PARAMS) throw badRequest(e.message, [{ path: 'height', message: 'is invalid' }]);
    throw unavailable(`Medulla did not answer getblock: ${(e as Error).message}`);
  }
}

/** Blocks by height, one RPC per distinct height per request. */
const blockLoader = (ctx: GqlContext) =>
  loader<number, Block | null>(ctx, 'medullaBlock', (heights) => Promise.all(heights.map((h) => blockAt(ctx.platform, h).catch((e: Error) => e))));

const loadBlock = (ctx: GqlContext, height: number) => blockLoader(ctx).load(height);

export const resolvers = {
  Mutation: {
    mineBlock: guarded((_: unknown, __: unknown, ctx: GqlContext) => mineBlockNow(ctx.platform)),
  },
  Query: {
    currentEpoch: guarded((_: unknown, __: unknown, ctx: GqlContext) => currentEpochInfo(ctx.platform)),
    block: guarded((_: unknown, a: { height: number }, ctx: GqlContext) => loadBlock(ctx, a.height)),
    recentBlocks: guarded(async (_: unknown, a: { last?: number }, ctx: GqlContext) => {
      try {
        return await recentBlocks(ctx.platform, a.last ?? 30);
      } catch (e) {
        // Unreachable or timed out, the client already threw a 503; an RPC error answer becomes one too.
        if (e instanceof MedullaRpcError) throw unavailable(`Medulla did not answer: ${(e as Error).message}`);
        throw e;
      }
    }),
    coherenceTuples: guarded((_: unknown, a: { last?: number }, ctx: GqlContext) => coherenceTuples(ctx.platform, a.last ?? 20)),
    servicesHealth: guarded((_: unknown, __: unknown, ctx: GqlContext) => servicesHealth(ctx.platform)),
    chainsHealth: health('chains'),
  },
  Block: {
    __resolveReference: guarded((ref: { height: number }, ctx: GqlContext) => loadBlock(ctx, ref.height)),
    previous: guarded((b: Block, _: unknown, ctx: GqlContext) => (b.height > 0 ? loadBlock(ctx, b.height - 1) : null)),
  },
  Epoch: {
    __resolveReference: guarded(async (ref: { epoch: number }, ctx: GqlContext) => {
      const info = await currentEpochInfo(ctx.platform);
      // Medulla mines one block per epoch: a past epoch's chain position is not kept, only its number.
      return ref.epoch === info.epoch ? info : { epoch: ref.epoch, height: ref.epoch, tip: '', difficulty: null };
    }),
    block: guarded((e: { height: number; tip: string }, _: unknown, ctx: GqlContext) => (e.tip ? loadBlock(ctx, e.height) : null)),
  },
};
