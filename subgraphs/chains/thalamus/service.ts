// Thalamus router (:7072): folds every epoch that ends (p.epochs.onAdvance) and on
// POST /v1/epoch/tick; GET /v1/epoch is the current epoch {epoch, height, tip}. At start it
// catches up on the epochs that ended while it was down (the last 64 at most).
import { conflict } from '../../../lib/errors.ts';
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { RunningService, ServiceStarter } from '../../../lib/service.ts';
import { catchUp, foldEpoch, LOOKBACK_EPOCHS, recheckLateWrites, refoldEvmGaps, resubmitPending, type Fold, type FoldContext } from './fold.ts';
import { loadOperator } from './operator.ts';
import { wiredSources, type FoldSources } from './sources.ts';

/**
 * Longest wait between an epoch's end and its fold (min(1.5 s, 3/8 of the interval)). Under load a
 * write stamped just before the block can be acknowledged 0.6–0.8 s after it (an outside audit of
 * the distributed cluster saw 170 such writes left out of 39 epochs at 0.5 s); the fold still comes
 * well before the next block, which commits it.
 */
export const FOLD_GRACE_MS = 1500;
/** Ended epochs with no fold yet that a fold of a later one folds first (two blocks close together). */
export const SKIPPED_FOLDS = 4;

export interface ThalamusService extends RunningService {
  url: string;
  /** Folds the last ended epoch (what the tick does). */
  tick(): Promise<Fold>;
}

export interface ThalamusOptions {
  port?: number;
  sources?: FoldSources;
  medullaUrl?: string;
  /** How long after an advance the ended epoch is folded (default min(1.5 s, 3/8 of the interval)). */
  foldGraceMs?: number;
  /** Ended epochs a restart catches up on and gaps are re-folded over (default 64). */
  lookbackEpochs?: number;
}

export async function createThalamus(p: Platform, opts: ThalamusOptions = {}): Promise<ThalamusService> {
  const sourceTimeoutMs = Math.min(2000, Math.max(1000, Math.floor(p.config.epochIntervalMs / 2)));
  const ctx: FoldContext = {
    p,
    sources: opts.sources ?? wiredSources(p, { sourceTimeoutMs }),
    operator: loadOperator(p.config.dataDir, p.config.thalamusOperatorKey),
    medullaUrl: opts.medullaUrl ?? p.config.urls.medulla,
    sourceTimeoutMs,
  };
  // Folds run one at a time; an advance during a fold queues the next one.
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => {});
    return run;
  };
  const lookback = opts.lookbackEpochs ?? LOOKBACK_EPOCHS;
  const foldEnded = async (epoch: number) => {
    const f = await foldEpoch(ctx, epoch);
    await resubmitPending(ctx, epoch - 16);
    // Cortex answered this fold: earlier folds it missed are re-folded (a discrepancy is a residue).
    if (!f.gaps.includes('evm')) await refoldEvmGaps(ctx, epoch, lookback);
    // The Hippocampus answered: writes of the epochs before that committed after their folds.
    if (!f.gaps.includes('ipfs')) await recheckLateWrites(ctx, epoch);
    return f;
  };

  // A restart folds the epochs that ended while it was down (bounded), before any new advance.
  void serial(async () => {
    const folds = await catchUp(ctx, p.epochs.current(), lookback);
    if (folds.length) p.log.info({ from: folds[0].epoch, to: folds[folds.length - 1].epoch }, 'thalamus: caught up on missed epochs');
  }).catch((e) => p.log.warn({ err: (e as Error).message }, 'thalamus: catch-up failed'));

  // Advances coalesce: while a fold runs (a stalled source costs its timeout), only the latest
  // ended epoch waits, so a stall never builds a backlog. Epochs that ended in between (two blocks
  // close together, as two manual mines make) are folded first, at most SKIPPED_FOLDS of them.
  let latest = -1;
  let queued = false;
  // The fold waits a grace period after the advance: a write stamped with the ended epoch just
  // before the block (its transaction still running, or its process told of the block a little
  // later than this one) lands in that epoch's fold instead of being left out of its ipfsRoot.
  const grace = opts.foldGraceMs ?? Math.min(FOLD_GRACE_MS, Math.floor((p.config.epochIntervalMs * 3) / 8));
  let graceTimer: NodeJS.Timeout | undefined;
  const off = p.epochs.onAdvance((info) => {
    if (info.epoch < 1) return;
    latest = Math.max(latest, info.epoch - 1);
    if (queued) return;
    queued = true;
    graceTimer = setTimeout(() => {
      void serial(async () => {
        queued = false;
        await catchUp(ctx, latest, SKIPPED_FOLDS);
        await foldEnded(latest);
      }).catch((e) => p.log.warn({ err: (e as Error).message }, 'thalamus: fold failed'));
    }, grace);
  });

  const tick = async () => {
    const current = p.epochs.current();
    if (current < 1) throw conflict('No epoch has ended yet (the current epoch is 0)', 'NO_ENDED_EPOCH');
    return serial(() => foldEnded(current - 1));
  };

  const app = createHttp({ name: 'thalamus', log: p.log, internalToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'thalamus', needs: ['database', 'bus', 'medulla', 'cortex'] });
  app.get('/health', async () => ({ ok: true, name: 'thalamus', ts: Date.now(), epoch: p.epochs.current(), operator: ctx.operator.pubKey }));
  app.get('/v1/epoch', async () => p.epochs.info());
  app.post('/v1/epoch/tick', async () => tick());
  const port = await listen(app, 'thalamus', p.config.host, opts.port ?? p.config.ports.thalamus);
  const host = p.config.host === '0.0.0.0' ? '127.0.0.1' : p.config.host;
  return {
    name: 'thalamus',
    url: `http://${host}:${port}`,
    tick,
    async close() {
      off();
      clearTimeout(graceTimer);
      await app.close();
      await chain;
    },
  };
}

export const startThalamus: ServiceStarter = (p) => createThalamus(p);
