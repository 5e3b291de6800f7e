// Who listens to a stack's emission events. Emission is computed, not written per epoch, so the
// emitter publishes `cog.treasury.emitted.<stackId>` only for stacks a live subscriber watches
// (the GraphQL emission(stackId) subscription, a /v1/events stream naming the stack). A watch is
// a row with an expiry, renewed while the subscriber stays: a gateway that dies leaves nothing behind.
import { randomBytes } from 'node:crypto';
import type { Db, Tx } from '../../lib/db/index.ts';
import type { Platform } from '../../lib/platform.ts';

export interface EmissionWatchHandle {
  close(): Promise<void>;
}

/** Watches `stackId` until close(); renews the row every epoch interval (expiry: three of them). */
export async function watchEmissions(p: Platform, stackId: string): Promise<EmissionWatchHandle> {
  const watcher = `watch:${process.pid}:${randomBytes(6).toString('hex')}`;
  const ttlMs = Math.max(10_000, 3 * p.config.epochIntervalMs);
  const renew = () =>
    p.db.prisma.emissionWatch.upsert({
      where: { stackId_watcher: { stackId, watcher } },
      create: { stackId, watcher, expiresAt: new Date(Date.now() + ttlMs) },
      update: { expiresAt: new Date(Date.now() + ttlMs) },
    });
  await renew();
  const timer = setInterval(() => renew().catch((e) => p.log.warn({ err: (e as Error).message }, 'emission watch: renew failed')), Math.max(1000, ttlMs / 3));
  timer.unref();
  let closed = false;
  return {
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      await p.db.prisma.emissionWatch.deleteMany({ where: { stackId, watcher } }).catch(() => {});
    },
  };
}

/** The stacks watched now (expired watches are dropped as they are found). */
export async function watchedStacks(db: Db | Tx): Promise<string[]> {
  const now = new Date();
  await db.emissionWatch.deleteMany({ where: { expiresAt: { lt: now } } });
  const rows = await db.emissionWatch.findMany({ where: { expiresAt: { gte: now } }, distinct: ['stackId'], select: { stackId: true } });
  return rows.map((r) => r.stackId);
}
