// How many residues there are of a status and kind (the inspector's board headers and the
// overview's open count), without listing them.
import type { Platform } from '../../lib/platform.ts';

export function countResidues(p: Platform, filter: { status?: string; kind?: string } = {}): Promise<number> {
  const where: Record<string, string> = {};
  if (filter.status) where.status = filter.status;
  if (filter.kind) where.kind = filter.kind;
  return p.db.prisma.residue.count({ where });
}
