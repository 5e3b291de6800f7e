// Folding an epoch: read the three sources (a failing or stalled one is a gap, never a wait),
// compute the roots (coherence.ts), sign, store the EpochAnchor with its Cortex 'anchor' intent
// and event in one transaction, then submit the tuple to Medulla. The first fold of an epoch is
// final: a later tick re-submits the stored tuple, so one operator never sends two tuples.
// A Cortex gap is re-folded once Cortex answers (refoldEvmGaps: a different evmRoot is a
// historical-non-canonical residue); a restart folds the epochs it missed (catchUp). Writes of an
// ended epoch that commit after its fold are found at the next folds (recheckLateWrites).
import type { Platform } from '../../../lib/platform.ts';
import { eventsPart, recordEvent, type EventRecord } from '../../../lib/events.ts';
import { runStatement } from '../../../lib/db/statement.ts';
import { sql } from '../../../lib/db/index.ts';
import { withTimeout } from '../../../lib/timeout.ts';
import { foldDuration, foldGaps } from '../../../lib/metrics.ts';
import { enqueueChainTx, newRecordIntentPart } from '../outbox.ts';
import { openResidue } from '../residue-port.ts';
import { committedElsewhere, openForeignTuple } from '../foreign-tuple.ts';
import { medullaRpc } from '../medulla/client.ts';
import { crossRootOf, evmRootOf, ipfsRootOf, rootsWithSleevesRoot, sleevesRootOf, type CoherenceTuple } from './coherence.ts';
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

/**
 * The DAG writes of the epochs folded or rechecked lately, with their ipfsRoot. The recheck of late
 * writes reads an epoch's writes again at each of the next LATE_WRITE_EPOCHS folds; while they are
 * the same list, in the same order, their root is the one already computed (hashing an epoch's
 * thousands of CIDs three times an epoch was 2-3% of the platform's thread under the perceive load;
 * comparing the lists is a hundredth of that).
 */
const foldedWrites = new WeakMap<FoldContext, Map<number, { cids: readonly string[]; root: string }>>();

function rememberWrites(ctx: FoldContext, epoch: number, cids: readonly string[], root: string): void {
  let seen = foldedWrites.get(ctx);
  if (!seen) foldedWrites.set(ctx, (seen = new Map()));
  seen.set(epoch, { cids, root });
  const newest = Math.max(...seen.keys());
  for (const e of seen.keys()) if (e < newest - LATE_WRITE_EPOCHS - 1) seen.delete(e);
}

/** ipfsRootOf an epoch's writes, from the last time these same writes were folded when they were. */
function ipfsRootOfWrites(ctx: FoldContext, epoch: number, cids: readonly string[]): string {
  const hit = foldedWrites.get(ctx)?.get(epoch);
  if (hit && hit.cids.length === cids.length && hit.cids.every((c, i) => c === cids[i])) return hit.root;
  const root = ipfsRootOf(cids);
  rememberWrites(ctx, epoch, cids, root);
  return root;
}

/** The fold's statement found the epoch folded already (by another instance): it changed nothing. */
class AnchorRaced extends Error {}

type AnchorRow = NonNullable<Awaited<ReturnType<Platform['db']['prisma']['epochAnchor']['findUnique']>>>;

function view(r: AnchorRow): Fold {
  return {
    epoch: r.epoch,
    crossRoot: r.crossRoot,
    evmRoot: r.evmRoot,
    ipfsRoot: r.ipfsRoot,
    sleevesRoot: r.sleevesRoot,
    btcRoot: r.btcRoot,
    gaps: r.gaps,
    submitted: r.submitted,
    operator: r.operator,
    blockHash: r.blockHash,
    blockHeight: r.blockHeight,
  };
}

async function read(ctx: FoldContext, epoch: number) {
  const gaps: Gap[] = [];
  const get = async <T>(gap: Gap, work: () => Promise<T>, empty: T): Promise<T> => {
    try {
      return await withTimeout(work, ctx.sourceTimeoutMs);
    } catch (e) {
      ctx.p.log.warn({ source: gap, epoch, err: (e as Error).message }, 'thalamus: source failed, folding without it');
      gaps.push(gap);
      foldGaps.inc({ source: gap });
      return empty;
    }
  };
  const [evmTxHashes, cids, sleeves] = await Promise.all([
    get('evm', () => ctx.sources.evm.txHashesForEpoch(epoch), [] as string[]),
    get('ipfs', () => ctx.sources.dag.cidsForEpoch(epoch), [] as string[]),
    get('sleeves', () => ctx.sources.sleeves.sleevesRoot(), { root: sleevesRootOf([]), count: 0 }),
  ]);
  return { input: { evmTxHashes, cids }, sleevesRoot: sleeves.root, gaps, counts: { evm: evmTxHashes.length, ipfs: cids.length, sleeves: sleeves.count } };
}

/** Sends the stored tuple to Medulla; marks it submitted on success. Never throws. */
export async function submitAnchor(ctx: FoldContext, f: Fold): Promise<boolean> {
  if (f.submitted) return true;
  const t: CoherenceTuple = { epoch: f.epoch, crossRoot: f.crossRoot, evmRoot: f.evmRoot, ipfsRoot: f.ipfsRoot, sleevesRoot: f.sleevesRoot };
  try {
    await medullaRpc(
      ctx.medullaUrl,
      'submitcoherenceroot',
      [t.epoch, t.crossRoot, t.evmRoot, t.ipfsRoot, t.sleevesRoot, ctx.operator.pubKey, ctx.operator.signTuple(t)],
      {
        timeoutMs: 3000,
        token: ctx.p.config.internalToken,
      },
    );
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
    const timer = foldDuration.startTimer();
    const { input, sleevesRoot, gaps, counts } = await read(ctx, epoch);
    const roots = rootsWithSleevesRoot(input, sleevesRoot);
    if (!gaps.includes('ipfs')) rememberWrites(ctx, epoch, input.cids, roots.ipfsRoot);
    const tuple: CoherenceTuple = { epoch, ...roots };
    const signature = ctx.operator.signTuple(tuple);
    const anchor = { epoch, ...roots, gaps, operator: ctx.operator.pubKey, signature };
    const folded: EventRecord = {
      subject: 'cog.thalamus.folded',
      type: 'thalamus.folded',
      data: { epoch, ...roots, gaps, leaves: counts, operator: ctx.operator.pubKey },
      msgId: `thalamus-folded:${epoch}`,
    };
    const intent = { kind: 'anchor' as const, ref: `anchor:${epoch}`, payload: { epoch, ...roots }, epoch };
    // Another operator's tuple committed for the epoch, or a Hippocampus gap: a residue opens with
    // the anchor, in one transaction. Otherwise (nearly every epoch) the anchor, its intent and its
    // event are one statement: a round trip, not the eight of a transaction.
    const foreign = await committedElsewhere(db, epoch, roots.crossRoot);
    if (!foreign && !gaps.includes('ipfs')) {
      try {
        await runStatement(ctx.p.db, [
          {
            ctes: [
              {
                name: 'epoch_anchor',
                body: sql`INSERT INTO "EpochAnchor" (epoch, "crossRoot", "evmRoot", "ipfsRoot", "sleevesRoot", "btcRoot", gaps, operator, signature, "intentQueued")
                  VALUES (${epoch}::int, ${roots.crossRoot}, ${roots.evmRoot}, ${roots.ipfsRoot}, ${roots.sleevesRoot}, ${roots.btcRoot}, ${gaps}::text[],
                    ${anchor.operator}, ${signature}, true)
                  ON CONFLICT (epoch) DO NOTHING RETURNING epoch`,
              },
            ],
            checks: [{ holds: sql`(SELECT count(*) FROM epoch_anchor) = 1`, fail: () => new AnchorRaced() }],
          },
          newRecordIntentPart(intent, 'epoch_anchor', 'anchor_intent'),
          eventsPart([folded])!,
        ]);
        // Stored as built here (nothing else writes a fold before it is submitted).
        timer();
        const f: Fold = { ...roots, epoch, gaps, submitted: false, operator: anchor.operator, blockHash: null, blockHeight: null };
        await submitAnchor(ctx, f);
        return f;
      } catch (e) {
        if (!(e instanceof AnchorRaced)) throw e;
      }
      row = (await db.epochAnchor.findUnique({ where: { epoch } }))!;
    } else {
      row = await db.$transaction(async (tx) => {
        const raced = await tx.epochAnchor.findUnique({ where: { epoch } });
        if (raced) return raced;
        const created = await tx.epochAnchor.create({ data: { ...anchor, intentQueued: true } });
        await enqueueChainTx(tx, intent);
        await recordEvent(tx, folded);
        const elsewhere = await committedElsewhere(tx, epoch, roots.crossRoot);
        if (elsewhere) {
          await openForeignTuple(
            tx,
            {
              epoch,
              committed: { crossRoot: elsewhere.crossRoot, blockHash: elsewhere.hash, height: elsewhere.height, node: elsewhere.node },
              folded: { crossRoot: roots.crossRoot, operator: ctx.operator.pubKey },
            },
            ctx.p.epochs.current(),
            ctx.p.config.residueExpiryEpochs,
          );
        }
        if (gaps.includes('ipfs')) {
          await openResidue(tx, {
            kind: 'shard-loss',
            trigger: `Hippocampus did not answer the fold of epoch ${epoch}; ipfsRoot folded without its writes`,
            epoch,
            evidence: { epoch, gaps, source: 'hippocampus' },
            dedupeKey: `shard-loss:thalamus:${epoch}`,
            expiryEpochs: ctx.p.config.residueExpiryEpochs,
          });
        }
        return created;
      }, TX_OPTS);
    }
    timer();
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

/** How far back the Thalamus looks: catch-up after a restart, and re-folds of Cortex gaps. */
export const LOOKBACK_EPOCHS = 64;

/** Most residue evidence keeps of the canonical transaction list. */
const EVIDENCE_TXS = 4096;

export interface Refold {
  epoch: number;
  evmRoot: string;
  crossRoot: string;
  txs: number;
  /** The historical-non-canonical residue opened when the re-fold differs from the committed tuple. */
  residueId: string | null;
}

/**
 * Once Cortex answers again, re-folds the evmRoot of every recent fold (epochs [before - lookback,
 * before)) that was folded with an `evm` gap. The committed tuple stays final (a second tuple would
 * be equivocation); the re-fold is recorded on the anchor (evmRefold), and when it differs from the
 * committed evmRoot the discrepancy becomes a historical-non-canonical residue. Stops at the first
 * epoch Cortex still does not answer (retried on a later fold). Never throws.
 */
export async function refoldEvmGaps(ctx: FoldContext, before: number, lookback = LOOKBACK_EPOCHS): Promise<Refold[]> {
  const db = ctx.p.db.prisma;
  const out: Refold[] = [];
  try {
    const rows = await db.epochAnchor.findMany({
      where: { gaps: { has: 'evm' }, epoch: { gte: Math.max(0, before - lookback), lt: before } },
      orderBy: { epoch: 'asc' },
    });
    for (const r of rows) {
      if (r.evmRefold !== null) continue;
      let txs: string[];
      try {
        txs = await withTimeout(() => ctx.sources.evm.txHashesForEpoch(r.epoch), ctx.sourceTimeoutMs);
      } catch (e) {
        ctx.p.log.warn({ epoch: r.epoch, err: (e as Error).message }, 'thalamus: cortex still not answering, re-fold later');
        break;
      }
      const evmRoot = evmRootOf(txs);
      const crossRoot = crossRootOf(evmRoot, r.ipfsRoot, r.sleevesRoot, r.btcRoot);
      const canonical = [...new Set(txs.map((h) => h.replace(/^0x/i, '').toLowerCase()))].sort();
      const refold = await db.$transaction(async (tx) => {
        const now = await tx.epochAnchor.findUnique({ where: { epoch: r.epoch } });
        if (!now || now.evmRefold !== null) return null; // another instance got there first
        let residueId: string | null = null;
        if (evmRoot !== r.evmRoot) {
          const { residue } = await openResidue(tx, {
            kind: 'historical-non-canonical',
            trigger: `Cortex did not answer the fold of epoch ${r.epoch}; its re-fold has evmRoot ${evmRoot}, the committed tuple ${r.evmRoot}`,
            epoch: r.epoch,
            evidence: {
              source: 'cortex',
              epoch: r.epoch,
              gaps: r.gaps,
              committed: { crossRoot: r.crossRoot, evmRoot: r.evmRoot, blockHash: r.blockHash, blockHeight: r.blockHeight },
              canonical: { crossRoot, evmRoot, txs: canonical.length, txHashes: canonical.slice(0, EVIDENCE_TXS) },
            },
            dedupeKey: `historical-non-canonical:thalamus-evm:${r.epoch}`,
            expiryEpochs: ctx.p.config.residueExpiryEpochs,
          });
          residueId = residue.id;
        }
        const value: Refold = { epoch: r.epoch, evmRoot, crossRoot, txs: canonical.length, residueId };
        await tx.epochAnchor.update({ where: { epoch: r.epoch }, data: { evmRefold: { ...value, atEpoch: before } } });
        await recordEvent(tx, {
          subject: 'cog.thalamus.refolded',
          type: 'thalamus.refolded',
          data: { ...value, committedCrossRoot: r.crossRoot, committedEvmRoot: r.evmRoot, differs: evmRoot !== r.evmRoot },
          msgId: `thalamus-refolded:${r.epoch}`,
        });
        return value;
      }, TX_OPTS);
      if (refold) out.push(refold);
    }
  } catch (e) {
    ctx.p.log.warn({ err: (e as Error).message }, 'thalamus: re-fold of cortex gaps failed, will retry');
  }
  return out;
}

/** Folded epochs before the one just folded whose DAG writes are read again (late writes). */
export const LATE_WRITE_EPOCHS = 2;

export interface LateWrites {
  epoch: number;
  /** The committed ipfsRoot, and the root of the epoch's writes as Hippocampus serves them now. */
  committedIpfsRoot: string;
  ipfsRoot: string;
  writes: number;
  residueId: string;
}

/**
 * The fold of an epoch reads its writes after a grace, but a write stamped with the epoch can
 * still commit later (a transaction slow under load, a process that heard of the block late). At
 * each fold the writes of the `back` folded epochs before `before` are read again; an epoch whose
 * writes no longer fold to its committed ipfsRoot is a historical-non-canonical residue (evidence
 * source 'hippocampus', the committed and the canonical roots; proof: the epoch's writes). The
 * committed tuple stays final, as for a Cortex re-fold. Epochs folded with an `ipfs` gap already
 * have their shard-loss residue. Never throws; a Hippocampus that does not answer is retried at
 * the next fold.
 */
export async function recheckLateWrites(ctx: FoldContext, before: number, back = LATE_WRITE_EPOCHS): Promise<LateWrites[]> {
  const db = ctx.p.db.prisma;
  const out: LateWrites[] = [];
  try {
    const rows = await db.epochAnchor.findMany({ where: { epoch: { gte: Math.max(0, before - back), lt: before } }, orderBy: { epoch: 'asc' } });
    for (const r of rows) {
      if (r.gaps.includes('ipfs')) continue;
      const cids = await withTimeout(() => ctx.sources.dag.cidsForEpoch(r.epoch), ctx.sourceTimeoutMs);
      const ipfsRoot = ipfsRootOfWrites(ctx, r.epoch, cids);
      if (ipfsRoot === r.ipfsRoot) continue;
      const crossRoot = crossRootOf(r.evmRoot, ipfsRoot, r.sleevesRoot, r.btcRoot);
      const { residue, created } = await db.$transaction(
        (tx) =>
          openResidue(tx, {
            kind: 'historical-non-canonical',
            trigger: `epoch ${r.epoch} has writes that committed after its fold; they fold to ipfsRoot ${ipfsRoot}, the committed tuple has ${r.ipfsRoot}`,
            epoch: r.epoch,
            evidence: {
              source: 'hippocampus',
              epoch: r.epoch,
              committed: { crossRoot: r.crossRoot, ipfsRoot: r.ipfsRoot, blockHash: r.blockHash, blockHeight: r.blockHeight },
              canonical: { crossRoot, ipfsRoot, writes: cids.length },
            },
            dedupeKey: `historical-non-canonical:thalamus-ipfs:${r.epoch}`,
            expiryEpochs: ctx.p.config.residueExpiryEpochs,
          }),
        TX_OPTS,
      );
      if (!created) continue;
      ctx.p.log.warn({ epoch: r.epoch, writes: cids.length, residue: residue.id }, 'thalamus: writes committed after the fold of their epoch');
      out.push({ epoch: r.epoch, committedIpfsRoot: r.ipfsRoot, ipfsRoot, writes: cids.length, residueId: residue.id });
    }
  } catch (e) {
    ctx.p.log.warn({ err: (e as Error).message }, "thalamus: re-reading recent epochs' writes failed, will retry");
  }
  return out;
}

/**
 * After a restart: folds every ended epoch after the last stored fold that has none, oldest first,
 * at most the last `lookback` ended epochs (older ones stay unfolded). Nothing when no fold was
 * ever stored (a first start folds from the next ended epoch on).
 */
export async function catchUp(ctx: FoldContext, current: number, lookback = LOOKBACK_EPOCHS): Promise<Fold[]> {
  const db = ctx.p.db.prisma;
  const last = await db.epochAnchor.findFirst({ orderBy: { epoch: 'desc' }, select: { epoch: true } });
  if (!last || current < 1) return [];
  const from = Math.max(last.epoch + 1, current - lookback);
  const out: Fold[] = [];
  for (let e = from; e <= current - 1; e++) out.push(await foldEpoch(ctx, e));
  return out;
}
