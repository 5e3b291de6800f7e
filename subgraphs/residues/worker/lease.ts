// The per-(pass, epoch) lease: a PassRun row. Whoever inserts it runs the pass; a row left
// unfinished past the lease timeout (its runner died) is taken over by a conditional UPDATE, so
// two survivors cannot both take it.
import type { Platform } from '../../../lib/platform.ts';

export async function acquirePass(p: Platform, pass: string, epoch: number, runner: string, leaseMs: number): Promise<boolean> {
  const created = await p.db.prisma.passRun.createMany({ data: [{ pass, epoch, runner }], skipDuplicates: true });
  if (created.count === 1) return true;
  const taken = await p.db.prisma.passRun.updateMany({
    where: { pass, epoch, finishedAt: null, startedAt: { lt: new Date(Date.now() - leaseMs) } },
    data: { runner, startedAt: new Date(), result: { takenOver: true } as never },
  });
  return taken.count === 1;
}

/** Marks the pass done; only the lease holder can (a runner that lost its lease changes nothing). */
export async function finishPass(p: Platform, pass: string, epoch: number, runner: string, result: Record<string, unknown>): Promise<boolean> {
  const done = await p.db.prisma.passRun.updateMany({
    where: { pass, epoch, runner, finishedAt: null },
    data: { finishedAt: new Date(), result: result as never },
  });
  return done.count === 1;
}

/** Leaves the lease unfinished with the error, for a takeover after the timeout. */
export async function failPass(p: Platform, pass: string, epoch: number, runner: string, error: string): Promise<void> {
  await p.db.prisma.passRun.updateMany({ where: { pass, epoch, runner, finishedAt: null }, data: { result: { error } as never } });
}

/** Unfinished leases older than the timeout, in recent epochs: the passes a dead runner left. */
export async function staleLeases(p: Platform, leaseMs: number, sinceEpoch: number): Promise<Array<{ pass: string; epoch: number }>> {
  return p.db.prisma.passRun.findMany({
    where: { finishedAt: null, startedAt: { lt: new Date(Date.now() - leaseMs) }, epoch: { gte: sinceEpoch } },
    select: { pass: true, epoch: true },
    orderBy: [{ epoch: 'asc' }],
  });
}
