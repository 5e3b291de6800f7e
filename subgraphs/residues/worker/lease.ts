// The per-(pass, epoch) lease: a PassRun row. Whoever inserts it runs the pass; a row left
// unfinished past the lease timeout (its runner died) is taken over by a conditional UPDATE, so
// two survivors cannot both take it.
// The insert that wins a lease and the update that finishes it run for every pass of every epoch
// (a dozen a second with 1 s epochs), so they go through the driver as prepared statements: through
// Prisma's engine each cost 0.3 ms of the platform's thread beyond the statement.
import type { Platform } from '../../../lib/platform.ts';

const INSERT_LEASE = `INSERT INTO "PassRun" (pass, epoch, runner) VALUES ($1, $2::int, $3) ON CONFLICT DO NOTHING RETURNING 1 AS won`;
const FINISH_LEASE = `UPDATE "PassRun" SET "finishedAt" = now(), result = $4::jsonb
  WHERE pass = $1 AND epoch = $2::int AND runner = $3 AND "finishedAt" IS NULL RETURNING 1 AS done`;

export async function acquirePass(p: Platform, pass: string, epoch: number, runner: string, leaseMs: number): Promise<boolean> {
  const created = await p.db.driver.query(INSERT_LEASE, [pass, epoch, runner], { prepare: true });
  if (created.length === 1) return true;
  const taken = await p.db.prisma.passRun.updateMany({
    where: { pass, epoch, finishedAt: null, startedAt: { lt: new Date(Date.now() - leaseMs) } },
    data: { runner, startedAt: new Date(), result: { takenOver: true } as never },
  });
  return taken.count === 1;
}

/** Marks the pass done; only the lease holder can (a runner that lost its lease changes nothing). */
export async function finishPass(p: Platform, pass: string, epoch: number, runner: string, result: Record<string, unknown>): Promise<boolean> {
  const done = await p.db.driver.query(FINISH_LEASE, [pass, epoch, runner, JSON.stringify(result)], { prepare: true });
  return done.length === 1;
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
