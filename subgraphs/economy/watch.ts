// Who listens to a stack's emission events. Emission is computed, not written per epoch, so the
// emitter publishes `cog.treasury.emitted.<stackId>` only for stacks a live subscriber watches
// (the GraphQL emission(stackId) subscription, a /v1/events stream naming the stack). A watch is
// a row with an expiry, renewed while the subscriber stays: a gateway that dies leaves nothing behind.
import { randomBytes } from 'node:crypto';
import { sql } from '../../lib/db/index.ts';
import { jsonValue, type StatementPart } from '../../lib/db/statement.ts';
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

/**
 * The stacks watched now, as part of a composed statement (the emitter's last): the expired watches
 * deleted, and the output `watched` the watched stack ids (json; read with watchedOf), as of the
 * transaction's start.
 */
export function watchedStacksPart(): StatementPart {
  return {
    ctes: [{ name: 'emission_watch_expired', body: sql`DELETE FROM "EmissionWatch" WHERE "expiresAt" < now()` }],
    outputs: [{ name: 'watched', expr: sql`(SELECT COALESCE(json_agg(DISTINCT "stackId"), '[]'::json) FROM "EmissionWatch" WHERE "expiresAt" >= now())` }],
  };
}

/** The `watched` output of watchedStacksPart. */
export function watchedOf(out: Record<string, unknown>): string[] {
  const v = jsonValue(out.watched);
  return Array.isArray(v) ? v.map(String) : [];
}
