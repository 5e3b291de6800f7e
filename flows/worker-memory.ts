// The memory side of the passes: merging shadow branches (memory-reconciler) and re-detecting lost
// shards (residue-collector). Known CIDs are the shards that completed needlecasts pinned.
import type { Platform } from '../lib/platform.ts';
import { hippocampusClient, mergeBranches, openBranches } from '../subgraphs/memory/index.ts';
import { runStatement } from '../lib/db/statement.ts';
import { openResidueNow, openResiduesPart } from '../subgraphs/residues/index.ts';
import { completedSagaShards, type SagaShards } from '../subgraphs/sleeves/index.ts';

/** Most branch ids one residue's evidence lists. */
const EVIDENCE_BRANCHES = 64;
/** Most branches one pass merges (the oldest first; a backlog drains over the next passes). */
export const MERGE_BATCH = 10_000;
/** Most branches one merge statement takes (the rest of the pass's batch in further statements). */
export const MERGE_STATEMENT = 250;

/**
 * Opens a speculative-divergence residue per sleeve that wrote beside the main line (one for all
 * the branches it wrote since the last pass: two sleeves writing in turn fork at every write, and
 * one residue per write would flood the residue list), then merges every branch into the main line.
 * The evidence is the sleeve's first branch (its proof: a node descending from that head).
 */
export async function reconcileBranches(p: Platform, epoch: number, perStatement = MERGE_STATEMENT): Promise<Record<string, unknown>> {
  const branches = await openBranches(p.db.prisma, undefined, MERGE_BATCH);
  const bySleeve = new Map<string, typeof branches>();
  for (const b of branches) {
    const k = `${b.stackId}:${b.sleeveId}`;
    const group = bySleeve.get(k);
    if (group) group.push(b);
    else bySleeve.set(k, [b]);
  }
  // One statement for the pass's residues (a transaction of four statements each was a third of
  // PGlite's round trips with 32 sleeves writing on one stack).
  const part = openResiduesPart(
    [...bySleeve.values()].map((group) => {
      const b = group[0]!;
      return {
        kind: 'speculative-divergence' as const,
        trigger:
          group.length === 1
            ? `sleeve ${b.sleeveId} wrote branch ${b.id} beside the main line`
            : `sleeve ${b.sleeveId} wrote ${group.length} branches beside the main line`,
        stackId: b.stackId,
        sleeveId: b.sleeveId,
        epoch,
        evidence: {
          branchId: b.id,
          headCid: b.headCid,
          baseCid: b.baseCid,
          branches: group.length,
          branchIds: group.slice(0, EVIDENCE_BRANCHES).map((x) => x.id),
        },
        dedupeKey: `speculative-divergence:${b.id}`,
        expiryEpochs: p.config.residueExpiryEpochs,
      };
    }),
  );
  const residues = part ? Number((await runStatement(p.db, [part])).residues_opened) : 0;
  // A statement per MERGE_STATEMENT branches, not one per branch (a branch per write when sleeves
  // take turns: per-branch transactions were most of the database's work under such load) nor one
  // for all: on PGlite a statement holds the only connection, and the writes queued behind one
  // epoch's merge of ~1,500 branches waited its whole run (30-286 ms, the perceive bench's p99).
  const ids = branches.map((b) => b.id);
  let merged = 0;
  for (let i = 0; i < ids.length; i += perStatement) merged += (await mergeBranches(p, ids.slice(i, i + perStatement))).length;
  return { open: branches.length, merged, residues };
}

/** A shard checked this many epochs ago is due again (at most 1/SHARD_RECHECK_EPOCHS of the known shards a pass). */
export const SHARD_RECHECK_EPOCHS = 8;

/** When each known shard was last walked, per platform (a process that restarts checks each one again once). */
const lastChecked = new WeakMap<Platform, Map<string, number>>();

/**
 * The shards of the newest completed sagas this pass walks: every one not checked yet (a new saga's),
 * then the least recently checked of those checked SHARD_RECHECK_EPOCHS or more epochs ago, at most
 * ceil(known / SHARD_RECHECK_EPOCHS) of them. So a pass costs the new shards plus a share, not every
 * shard every epoch, and each shard is walked again within about SHARD_RECHECK_EPOCHS epochs.
 */
export function dueShards(checked: Map<string, number>, known: readonly string[], epoch: number): string[] {
  const fresh: string[] = [];
  const due: string[] = [];
  for (const cid of known) {
    const at = checked.get(cid);
    if (at === undefined) fresh.push(cid);
    else if (epoch - at >= SHARD_RECHECK_EPOCHS || at > epoch) due.push(cid);
  }
  due.sort((a, b) => checked.get(a)! - checked.get(b)!);
  return [...fresh, ...due.slice(0, Math.ceil(known.length / SHARD_RECHECK_EPOCHS))];
}

/** The newest completed sagas whose shards are re-checked. */
export const SHARD_SAGAS = 50;

/**
 * Opens a shard-loss residue for each needlecast shard Hippocampus can no longer serve, walking the
 * shards `dueShards` picks: `opened` residues, `walked` shards.
 */
export async function detectShardLoss(
  p: Platform,
  epoch: number,
  sagas = SHARD_SAGAS,
  /** The completed sagas' shards when the caller read them already (the residue collector's one read). */
  read?: SagaShards[],
): Promise<{ opened: number; walked: number }> {
  const rows = read ?? (await completedSagaShards(p.db, sagas));
  const known = new Map<string, SagaShards>();
  for (const s of rows) for (const cid of s.shards) if (!known.has(cid)) known.set(cid, s);
  let checked = lastChecked.get(p);
  if (!checked) lastChecked.set(p, (checked = new Map()));
  for (const cid of checked.keys()) if (!known.has(cid)) checked.delete(cid); // only the shards still known
  const walk = dueShards(checked, [...known.keys()], epoch);
  const hippo = hippocampusClient(p);
  let opened = 0;
  for (const cid of walk) {
    const s = known.get(cid)!;
    const result = await hippo.walk(cid, 1, epoch);
    const served = result.nodes.some((n) => n.cid === cid);
    // A walk may answer from its payload cache: whether the payload is lost is the store's to say.
    if (!(served && (await hippo.meta(cid))?.stored)) {
      const { created } = await openResidueNow(p.db.prisma, {
        kind: 'shard-loss',
        trigger: `shard ${cid} of ${s.sagaId} is unreachable on Hippocampus`,
        stackId: s.stackId,
        epoch,
        evidence: { cid, sagaId: s.sagaId, gated: result.gated.includes(cid), missing: served || result.missing.includes(cid) },
        dedupeKey: `shard-loss:${cid}`,
        expiryEpochs: p.config.residueExpiryEpochs,
      });
      if (created) opened++;
    }
    checked.set(cid, epoch);
  }
  return { opened, walked: walk.length };
}
