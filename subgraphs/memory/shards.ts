// Pin maintenance (the memory sleeve's per-epoch job): every pinned node of a stack, and its head,
// must still be reachable on the Hippocampus; a known CID that is not opens a shard-loss residue.
import type { Platform } from '../../lib/platform.ts';
import { openResidue } from '../residues/index.ts';
import { getStackRow } from '../stacks/index.ts';
import { hippocampusClient } from './hippocampus/client.ts';

export const MAX_PINS_CHECKED = 256;

export async function checkPinnedShards(p: Platform, stackId: string, sleeveId?: string): Promise<{ checked: number; lost: string[] }> {
  const stack = await getStackRow(p.db.prisma, stackId);
  const pinned = await p.db.prisma.memoryNode.findMany({
    where: { stackId, pinned: true },
    select: { cid: true },
    orderBy: { writeSeq: 'desc' },
    take: MAX_PINS_CHECKED,
  });
  const known = [...new Set([...(stack.episodicHead ? [stack.episodicHead] : []), ...pinned.map((r) => r.cid)])];
  const hippo = hippocampusClient(p);
  const lost: string[] = [];
  for (const cid of known) {
    const meta = await hippo.meta(cid);
    if (!meta?.stored) lost.push(cid);
  }
  const epoch = p.epochs.current();
  for (const cid of lost) {
    await p.db.prisma.$transaction((tx) =>
      openResidue(tx, {
        kind: 'shard-loss',
        trigger: `known CID ${cid} is unreachable on the Hippocampus`,
        stackId,
        sleeveId,
        epoch,
        evidence: { cid, head: stack.episodicHead === cid },
        dedupeKey: `shard-loss:${stackId}:${cid}`,
        expiryEpochs: p.config.residueExpiryEpochs,
      }),
    );
  }
  return { checked: known.length, lost };
}
