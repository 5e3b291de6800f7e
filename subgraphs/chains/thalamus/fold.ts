// Folding an epoch: read the three sources (a failing or stalled one is a gap, never a wait),
// compute the roots (coherence.ts), sign, store the EpochAnchor with its Cortex 'anchor' intent
// and event in one transaction, then submit the tuple to Medulla. The first fold of an epoch is
// final: a later tick re-submits the stored tuple, so one operator never sends two tuples.
import type { Platform } from '../../../lib/platform.ts';
import { recordEvent } from '../../../lib/events.ts';
import { enqueueChainTx } from '../outbox.ts';
import { openResidue } from '../../residues/open.ts';
import { medullaRpc } from '../medulla/client.ts';
import { computeRoots, type CoherenceTuple } from './coherence.ts';
import type { Operator } from './operator.ts';
import type { FoldSources } from './sources.ts';

/** PGlite on a busy 2-core machine can exceed Prisma's 5 s default. */
const TX_OPTS = { timeout: 20_000, maxWait: 20_000 };

export type Gap = 'evm' | 'ipfs' | 'sleeves';

export interface Fold {
  epoch: number;
  crossRoot: string;
  evmRoot: string;
  ipfsRoot: string;
  sleevesRoot: string;
  btcRoot: string;
  /** Sources that failed or stalled ('evm' = Cortex, 'ipfs' = Hippocampus, 'sleeves'). */
  gaps: string[];
  /** Accepted by Medulla's submitcoherenceroot. */
  submitted: boolean;
  operator: string | null;
  blockHash: string | null;
  blockHeight: number | null;
}

export interface FoldContext {
  p: Platform;
  sources: FoldSources;
  operator: Operator;
  medullaUrl: string;
  /** A source slower than this is a gap. */
  sourceTimeoutMs: number;
}

type AnchorRow = NonNullable<Awaited<ReturnType<Platform['db']['prisma']['epochAnchor']['findUnique']>>>;

function view(r: AnchorRow): Fold {
  return {
    epoch: r.epoch, crossRoot: r.crossRoot, evmRoot: r.evmRoot, ipfsRoot: r.ipfsRoot, sleevesRoot: r.sleevesRoot, btcRoot: r.btcRoot,
    gaps: r.gaps, submitted: r.submitted, operator: r.operator, blockHash: r.blockHash, blockHeight: r.blockHeight,
  };
}

async function withTimeout<T>(work: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stall = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)));
  try {
    return await Promise.race([work(), stall]);
  } finally {
    clearTimeout(timer);
  }
}

async function read(ctx: FoldContext, epoch: number) {
  const gaps: Gap[] = [];
  const get = async <T>(gap: Gap, work: () => Promise<T>, empty: T): Promise<T> => {
    try {
      return await withTimeout(work, ctx.sourceTimeoutMs);
    } catch (e) {
      ctx.p.log.warn({ source: gap, epoch, err: (e as Error).message }, 'thalamus: source failed, folding without it');
      gaps.push(gap);
      return empty;
    }
  };
  const [evmTxHashes, cids, sleeves] = await Promise.all([
    get('evm', () => ctx.sources.evm.txHashesForEpoch(epoch), [] as string[]),
    get('ipfs', () => ctx.sources.dag.cidsForEpoch(epoch), [] as string[]),
    get('sleeves', () => ctx.sources.sleeves.activeSleeves(), [] as { type: string; id: string }[]),
  ]);
  return { input: { evmTxHashes, cids, sleeves }, gaps, counts: { evm: evmTxHashes.length, ipfs: cids.length, sleeves: sleeves.length } };
}

/** Sends the stored tuple to Medulla; marks it submitted on success. Never throws. */
export async function submitAnchor(ctx: FoldContext, f: Fold): Promise<boolean> {
  if (f.submitted) return true;
  const t: CoherenceTuple = { epoch: f.epoch, crossRoot: f.crossRoot, evmRoot: f.evmRoot, ipfsRoot: f.ipfsRoot, sleevesRoot: f.sleevesRoot };
  try {
    await medullaRpc(ctx.medullaUrl, 'submitcoherenceroot', [t.epoch, t.crossRoot, t.evmRoot, t.ipfsRoot, t.sleevesRoot, ctx.operator.pubKey, ctx.operator.signTuple(t)], {
      timeoutMs: 3000, token: ctx.p.config.internalToken,
    });
    await ctx.p.db.prisma.epochAnchor.update({ where: { epoch: f.epoch }, data: { submitted: true } });
    f.submitted = true;
    return true;
  } catch (e) {
    ctx.p.log.warn({ epoch: f.epoch, err: (e as Error).message }, 'thalamus: medulla did not take the tuple, will retry');
    return false;
  }
}

/** Folds `epoch` once (later calls return the stored fold) and submits it to Medulla. */
export async function foldEpoch(ctx: FoldContext, epoch: number): Promise<Fold> {
  const db = ctx.p.db.prisma;
  let row = await db.epochAnchor.findUnique({ where: { epoch } });
  if (!row) {
    const { input, gaps, counts } = await read(ctx, epoch);
    const roots = computeRoots(input);
    const tuple: CoherenceTuple = { epoch, ...roots };
    const signature = ctx.operator.signTuple(tuple);
    row = await db.$transaction(async (tx) => {
      const raced = await tx.epochAnchor.findUnique({ where: { epoch } });
      if (raced) return raced;
      const created = await tx.epochAnchor.create({ data: { epoch, ...roots, gaps, operator: ctx.operator.pubKey, signature } });
      await enqueueChainTx(tx, { kind: 'anchor', ref: `anchor:${epoch}`, payload: { epoch, ...roots }, epoch });
      await recordEvent(tx, {
        subject: 'cog.thalamus.folded', type: 'thalamus.folded',
        data: { epoch, ...roots, gaps, leaves: counts, operator: ctx.operator.pubKey }, msgId: `thalamus-folded:${epoch}`,
      });
      if (gaps.includes('ipfs')) {
        await openResidue(tx, {
          kind: 'shard-loss', trigger: `Hippocampus did not answer the fold of epoch ${epoch}; ipfsRoot folded without its writes`,
          epoch, evidence: { epoch, gaps, source: 'hippocampus' }, dedupeKey: `shard-loss:thalamus:${epoch}`, expiryEpochs: ctx.p.config.residueExpiryEpochs,
        });
      }
      return created;
    }, TX_OPTS);
  }
  const f = view(row);
  await submitAnchor(ctx, f);
  return f;
}

/** Re-submits recent folds Medulla has not taken yet (it was down, or a reorg is not our concern here). */
export async function resubmitPending(ctx: FoldContext, sinceEpoch: number): Promise<number> {
  const rows = await ctx.p.db.prisma.epochAnchor.findMany({ where: { submitted: false, epoch: { gte: sinceEpoch } }, orderBy: { epoch: 'asc' }, take: 16 });
  let n = 0;
  for (const r of rows) if (await submitAnchor(ctx, view(r))) n++;
  return n;
}
