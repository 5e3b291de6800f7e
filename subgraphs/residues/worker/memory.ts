// The memory side of the passes: merging shadow branches (memory-reconciler) and re-detecting lost
// shards (residue-collector). Known CIDs are the shards that completed needlecasts pinned.
import type { Platform } from '../../../lib/platform.ts';
import { hippocampusClient } from '../../memory/hippocampus/client.ts';
import { mergeBranch, openBranches } from '../../memory/memory.ts';
import { openResidueNow } from '../open.ts';

/** Opens a speculative-divergence residue per open branch, then merges it into the main line. */
export async function reconcileBranches(p: Platform, epoch: number): Promise<Record<string, unknown>> {
  const branches = await openBranches(p.db.prisma);
  const merged: string[] = [];
  let residues = 0;
  for (const b of branches) {
    const { created } = await openResidueNow(p.db.prisma, {
      kind: 'speculative-divergence', trigger: `sleeve ${b.sleeveId} wrote branch ${b.id} beside the main line`,
      stackId: b.stackId, sleeveId: b.sleeveId, epoch,
      evidence: { branchId: b.id, headCid: b.headCid, baseCid: b.baseCid }, dedupeKey: `speculative-divergence:${b.id}`,
      expiryEpochs: p.config.residueExpiryEpochs,
    });
    if (created) residues++;
    try {
      await mergeBranch(p, b.id);
      merged.push(b.id);
    } catch (e) {
      p.log.warn({ branchId: b.id, err: (e as Error).message }, 'memory-reconciler: merge failed, will retry next epoch');
    }
  }
  return { open: branches.length, merged: merged.length, residues };
}

/** Opens a shard-loss residue for each needlecast shard Hippocampus can no longer serve. */
export async function detectShardLoss(p: Platform, epoch: number, sagas = 50): Promise<number> {
  const rows = await p.db.prisma.saga.findMany({ where: { status: 'completed' }, orderBy: { createdAt: 'desc' }, take: sagas, select: { id: true, stackId: true, shards: true } });
  const hippo = hippocampusClient(p);
  let opened = 0;
  for (const s of rows) {
    for (const cid of s.shards) {
      const walk = await hippo.walk(cid, 1, epoch);
      if (walk.nodes.some((n) => n.cid === cid)) continue;
      const { created } = await openResidueNow(p.db.prisma, {
        kind: 'shard-loss', trigger: `shard ${cid} of ${s.id} is unreachable on Hippocampus`, stackId: s.stackId, epoch,
        evidence: { cid, sagaId: s.id, gated: walk.gated.includes(cid), missing: walk.missing.includes(cid) }, dedupeKey: `shard-loss:${cid}`,
        expiryEpochs: p.config.residueExpiryEpochs,
      });
      if (created) opened++;
    }
  }
  return opened;
}
