// The DHF compositor's reconstruction: the recall walk and per-epoch decryption, authorised by the
// sleeve's key lease (alive, of this stack, lease active). No token charge and no drift: it is the
// compositor the needlecast reconstruct step uses, not a client recall.
import type { Platform } from '../../../lib/platform.ts';
import { conflict } from '../../../lib/errors.ts';
import { getStackRow } from '../../stacks/index.ts';
import { getSleeveRow, requireKeyLease, requireSleeveOfStack } from '../../sleeves/index.ts';
import { checkDepth, reconstruct } from '../memory.ts';

export interface ReconstructOutput {
  ok: boolean;
  fragments: Array<{ cid: string; text: string; epoch: number }>;
  broken: string[];
  fidelity: number;
}

export async function dhfReconstruct(p: Platform, input: { stackId: string; sleeveId: string; depth: unknown }): Promise<ReconstructOutput> {
  const depth = checkDepth(input.depth);
  const stack = await getStackRow(p.db.prisma, input.stackId);
  const sleeve = await getSleeveRow(p.db.prisma, input.sleeveId);
  requireSleeveOfStack(sleeve, stack.id);
  if (!sleeve.alive) throw conflict(`sleeve ${sleeve.id} is decommissioned`, 'SLEEVE_DECOMMISSIONED');
  await requireKeyLease(p.db.prisma, sleeve.id, stack.id);
  const r = await reconstruct(p, stack, depth);
  return {
    ok: true,
    fragments: r.fragments.map((f) => ({ cid: f.node.cid, text: f.text, epoch: f.node.epoch })),
    broken: r.broken,
    fidelity: r.fidelity,
  };
}
