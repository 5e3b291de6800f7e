// The six Worker Runner passes (spec: Worker Runner passes), a flow over the contexts they touch
// (sleeves, chains, residues, memory, economy). The Worker Runner (subgraphs/residues/worker) runs
// them through its port p.ports.workerPasses, filled by bin/assembly.ts. Each is idempotent on its
// own (a second run for the same epoch changes nothing), on top of the once-per-epoch lease.
import type { Platform } from '../lib/platform.ts';
import { recordEvent, recordEventOnce } from '../lib/events.ts';
import { enqueueFoldedAnchors } from '../subgraphs/chains/index.ts';
import { emitEpoch } from '../subgraphs/economy/index.ts';
import { pruneForgotten } from '../subgraphs/memory/index.ts';
import { readStatement } from '../lib/db/statement.ts';
import { expireResidues, openResidue, residuesDueRead, type Pass, type PassResult } from '../subgraphs/residues/index.ts';
import {
  completedSagaShardsRead,
  decommissionInTx,
  flagSleeve,
  getSleeveRow,
  listAliveSleevesOverDrift,
  listStaleSleeves,
  markStaleReported,
  staleSleevesRead,
} from '../subgraphs/sleeves/index.ts';
import { detectShardLoss, reconcileBranches, SHARD_SAGAS } from './worker-memory.ts';

export type { Pass, PassResult };

/** Epochs behind (current epoch - syncEpoch) that make a sleeve stale (spec: Residue). */
export const STALE_EPOCHS = 4;

const driftMilli = (p: Platform) => Math.round(p.config.driftMax * 1000);

/** Flags alive sleeves above the maximum; desync events above twice the maximum. */
export async function driftChecker(p: Platform, epoch: number): Promise<PassResult> {
  const max = driftMilli(p);
  const over = await listAliveSleevesOverDrift(p.db, max);
  let flagged = 0;
  let desynced = 0;
  for (const s of over) {
    await p.db.prisma.$transaction(async (tx) => {
      const drift = s.driftMilli / 1000;
      if (await flagSleeve(tx, s.id)) {
        flagged++;
        await recordEvent(tx, {
          subject: `cog.sleeve.flagged.${s.stackId}`,
          type: 'sleeve.flagged',
          data: { sleeveId: s.id, stackId: s.stackId, drift, epoch },
          msgId: `sleeve-flagged:${s.id}:${epoch}`,
        });
      }
      if (s.driftMilli > 2 * max) {
        desynced++;
        await recordEventOnce(tx, {
          subject: `cog.sleeve.desynced.${s.stackId}`,
          type: 'sleeve.desynced',
          data: { id: s.id, sleeveId: s.id, stackId: s.stackId, drift, epoch },
          msgId: `sleeve-desynced:${s.id}:${epoch}`,
        });
      }
    });
  }
  return { over: over.length, flagged, desynced };
}

/** Commits each folded epoch's anchor to EpochAnchor on Cortex (one 'anchor' intent per epoch). */
export async function epochAnchor(p: Platform, epoch: number): Promise<PassResult> {
  return { anchored: await enqueueFoldedAnchors(p, epoch) };
}

/** Sleeves the stale-ordering check reads at a time. */
export const STALE_BATCH = 500;

/**
 * Opens residues from real signals and expires old ones. Stale-ordering: the alive, unfrozen
 * sleeves behind since their last sync (or spawn, if they never synced) by STALE_EPOCHS or more,
 * whose residue for that epoch is not opened yet, found on their partial index in batches: each
 * pass costs the sleeves that became stale, not every alive sleeve.
 */
export async function residueCollector(p: Platform, epoch: number): Promise<PassResult> {
  // What is due, in one round trip (three reads of one statement): the first batch of newly stale
  // sleeves, the sagas whose shards are re-checked, and whether any residue expires. Most epochs
  // nothing is, and the pass was five round trips (two of them an empty expiry transaction's) on
  // the pool and event loop the writers share: 85 ms an epoch doing nothing at 100,000 stacks.
  const due = await readStatement(p.db, {
    stale: staleSleevesRead(epoch - STALE_EPOCHS, STALE_BATCH),
    sagas: completedSagaShardsRead(SHARD_SAGAS),
    expiring: residuesDueRead(epoch),
  });
  let stale = 0;
  for (let first = true; ; first = false) {
    const batch = first ? due.stale : await listStaleSleeves(p.db, epoch - STALE_EPOCHS, STALE_BATCH);
    for (const s of batch) {
      const since = Math.max(s.syncEpoch, s.spawnEpoch);
      const behind = epoch - since;
      const created = await p.db.prisma.$transaction(async (tx) => {
        const r = await openResidue(tx, {
          kind: 'stale-ordering',
          trigger: `sleeve ${s.id} is ${behind} epochs behind (last synced or spawned at epoch ${since}, epoch ${epoch})`,
          stackId: s.stackId,
          sleeveId: s.id,
          epoch,
          evidence: { sleeveId: s.id, syncEpoch: s.syncEpoch, spawnEpoch: s.spawnEpoch, epoch, behind },
          dedupeKey: `stale-ordering:${s.id}:${since}`,
          expiryEpochs: p.config.residueExpiryEpochs,
        });
        await markStaleReported(tx, s.id, since);
        return r.created;
      });
      if (created) stale++;
    }
    if (batch.length < STALE_BATCH) break;
  }
  const { opened: shardLoss } = await detectShardLoss(p, epoch, SHARD_SAGAS, due.sagas);
  const expired = due.expiring ? (await expireResidues(p, epoch)).length : 0;
  return { stale, shardLoss, expired };
}

/** Merges shadow branches, then forgets unpinned nodes past the retention window. */
export async function memoryReconciler(p: Platform, epoch: number): Promise<PassResult> {
  const merged = await reconcileBranches(p, epoch);
  const { pruned } = await pruneForgotten(p);
  return { ...merged, pruned };
}

export async function treasuryEmitter(p: Platform, epoch: number): Promise<PassResult> {
  return emitEpoch(p, epoch);
}

/** Decommissions sleeves desynced above twice the maximum, each with a residue. */
export async function sleeveWatchdog(p: Platform, epoch: number): Promise<PassResult> {
  const max = driftMilli(p);
  const desynced = (await listAliveSleevesOverDrift(p.db, 2 * max)).filter((s) => !s.frozen);
  const decommissioned: string[] = [];
  for (const s of desynced) {
    const drift = s.driftMilli / 1000;
    const trigger = `desync: drift ${drift} above 2 x max (${2 * p.config.driftMax})`;
    await p.db.prisma.$transaction(async (tx) => {
      if (!(await getSleeveRow(tx, s.id)).alive) return;
      await decommissionInTx(tx, epoch, s.id, trigger);
      await openResidue(tx, {
        kind: 'stale-ordering',
        trigger,
        stackId: s.stackId,
        sleeveId: s.id,
        epoch,
        evidence: { sleeveId: s.id, syncEpoch: s.syncEpoch, drift, desync: true },
        dedupeKey: `desync:${s.id}`,
        expiryEpochs: p.config.residueExpiryEpochs,
      });
      decommissioned.push(s.id);
    });
  }
  return { decommissioned };
}

/** In spec order. */
export const PASSES: ReadonlyArray<readonly [string, Pass]> = [
  ['drift-checker', driftChecker],
  ['epoch-anchor', epochAnchor],
  ['residue-collector', residueCollector],
  ['memory-reconciler', memoryReconciler],
  ['treasury-emitter', treasuryEmitter],
  ['sleeve-watchdog', sleeveWatchdog],
];
