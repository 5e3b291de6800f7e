// The sleeve runtime: one per process, following the bus (cog.sleeve.spawned/changed/decommissioned)
// and the database (at start and every reconcile interval). Each alive sleeve gets an /identity
// endpoint on its own port and, unless frozen, a tick loop at its kind's rate: human and ai on
// timers, memory once per epoch, mining on each mined block. A tick is the heartbeat (lastTickAt,
// `cog.sleeve.tick`) plus the kind's upkeep; it never perceives, spends tokens or changes drift.
// A failing tick is logged and reported on `cog.sleeve.tick` with ok:false; the loop goes on.
import os from 'node:os';
import type { FastifyInstance } from 'fastify';
import { createHttp, listen } from '../../../lib/http.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { Subscription } from '../../../lib/bus/port.ts';
import type { SleeveRow } from '../view.ts';
import { sleeveMemory } from '../memory-port.ts';

/** Kind-specific upkeep a host may register (journaling, inference...); runs inside the tick. */
export type TickHandler = (sleeve: SleeveRow, p: Platform) => Promise<void> | void;

interface Instance {
  row: SleeveRow;
  server: FastifyInstance;
  port: number;
  timer?: NodeJS.Timeout;
  /** When the next timer tick is due (Date.now() ms): ticks keep their cadence, a re-read of the row does not restart it. */
  dueAt?: number;
  ticking: boolean;
}

/** Whether a re-read row changes how the sleeve ticks (anything else keeps its timer running). */
const tickingChanged = (a: SleeveRow, b: SleeveRow) =>
  a.tickRate !== b.tickRate || a.frozen !== b.frozen || a.alive !== b.alive || a.embodimentType !== b.embodimentType;

export interface SleeveRuntime {
  /** Sleeve ids with a running instance. */
  running(): string[];
  /** Runs one tick now (tests, event-driven kinds). */
  tick(sleeveId: string): Promise<boolean>;
  reconcile(): Promise<void>;
  onTick(kind: string, handler: TickHandler): void;
  stats(): { ticks: number; failures: number };
  close(): Promise<void>;
}

export async function startRuntime(p: Platform, opts: { reconcileMs?: number } = {}): Promise<SleeveRuntime> {
  const instances = new Map<string, Instance>();
  const handlers = new Map<string, TickHandler[]>();
  const counters = { ticks: 0, failures: 0 };
  const pending = new Map<string, Promise<void>>();
  let closed = false;

  async function upkeep(row: SleeveRow): Promise<void> {
    if (row.embodimentType === 'memory') await sleeveMemory(p).checkPinnedShards(p, row.stackId, row.id);
    for (const h of handlers.get(row.embodimentType) ?? []) await h(row, p);
  }

  async function tick(id: string): Promise<boolean> {
    const inst = instances.get(id);
    if (!inst || inst.row.frozen || !inst.row.alive || inst.ticking || closed) return false;
    inst.ticking = true;
    try {
      const now = new Date();
      const n = await p.db.prisma.sleeve.updateMany({ where: { id, alive: true, frozen: false }, data: { lastTickAt: now } });
      if (n.count === 0) return false;
      await upkeep(inst.row);
      counters.ticks++;
      await p.bus.publish('cog.sleeve.tick', {
        type: 'sleeve.tick',
        ts: now.getTime(),
        ok: true,
        sleeveId: id,
        stackId: inst.row.stackId,
        kind: inst.row.embodimentType,
      });
      return true;
    } catch (e) {
      counters.failures++;
      p.log.warn({ sleeveId: id, err: (e as Error).message }, 'sleeve tick failed; the loop continues');
      await p.bus
        .publish('cog.sleeve.tick', {
          type: 'sleeve.tick',
          ts: Date.now(),
          ok: false,
          sleeveId: id,
          stackId: inst.row.stackId,
          kind: inst.row.embodimentType,
          error: (e as Error).message,
        })
        .catch(() => {});
      return false;
    } finally {
      inst.ticking = false;
    }
  }

  /**
   * Arms the sleeve's timer for its next tick, every tickRate ms on a fixed cadence (a slow tick
   * does not push the next one back; ticks missed while the process was busy are not made up).
   * `from`: when the cadence (re)starts; otherwise the next tick is one tickRate after the last due one.
   */
  function schedule(inst: Instance, from?: number): void {
    clearTimeout(inst.timer);
    inst.timer = undefined;
    const { embodimentType: kind, tickRate, frozen, alive } = inst.row;
    if (closed || frozen || !alive || kind === 'memory' || kind === 'mining' || tickRate <= 0) {
      inst.dueAt = undefined;
      return;
    }
    const now = Date.now();
    const next = from !== undefined || inst.dueAt === undefined ? (from ?? now) + tickRate : inst.dueAt + tickRate;
    inst.dueAt = Math.max(next, now);
    inst.timer = setTimeout(async () => {
      await tick(inst.row.id);
      if (instances.get(inst.row.id) === inst) schedule(inst);
    }, inst.dueAt - now);
    inst.timer.unref();
  }

  async function identityServer(row: SleeveRow): Promise<{ server: FastifyInstance; port: number }> {
    const server = createHttp({ name: `sleeve-${row.id}`, log: p.log, metrics: false });
    server.get('/identity', async () => {
      const cur = instances.get(row.id)?.row ?? row;
      return { sleeveId: cur.id, kind: cur.embodimentType, stackId: cur.stackId, hostname: cur.hostname ?? os.hostname() };
    });
    const port = await listen(server, `sleeve ${row.id}`, p.config.host, 0);
    return { server, port };
  }

  async function stop(id: string): Promise<void> {
    const inst = instances.get(id);
    if (!inst) return;
    instances.delete(id);
    clearTimeout(inst.timer);
    await inst.server.close().catch(() => {});
    await p.db.prisma.sleeve.updateMany({ where: { id, identityPort: inst.port }, data: { identityPort: null } }).catch(() => {});
  }

  // One sync per sleeve at a time, so a burst of events cannot start two servers for one sleeve.
  function sync(id: string): Promise<void> {
    const prev = pending.get(id) ?? Promise.resolve();
    const next = prev
      .then(async () => {
        if (closed) return;
        const row = await p.db.prisma.sleeve.findUnique({ where: { id } });
        if (!row?.alive) return stop(id);
        const inst = instances.get(id);
        if (inst) {
          // The reconcile pass and every sleeve event re-read the row; only a change to how it ticks
          // re-arms the timer (from the last tick, so a new rate applies from there), else it keeps its cadence.
          const before = inst.row;
          inst.row = row;
          if (!tickingChanged(before, row)) return;
          return schedule(inst, row.lastTickAt && !before.frozen ? row.lastTickAt.getTime() : Date.now());
        }
        const { server, port } = await identityServer(row);
        if (closed) return void (await server.close());
        const updated = await p.db.prisma.sleeve.update({ where: { id }, data: { identityPort: port } });
        const fresh: Instance = { row: updated, server, port, ticking: false };
        instances.set(id, fresh);
        schedule(fresh);
      })
      .catch((e) => p.log.warn({ sleeveId: id, err: (e as Error).message }, 'sleeve runtime: sync failed'))
      .finally(() => {
        if (pending.get(id) === next) pending.delete(id);
      });
    pending.set(id, next);
    return next;
  }

  async function reconcile(): Promise<void> {
    const alive = await p.db.prisma.sleeve.findMany({ where: { alive: true }, select: { id: true } });
    const ids = new Set(alive.map((r) => r.id));
    await Promise.all([...ids, ...[...instances.keys()].filter((id) => !ids.has(id))].map(sync));
  }

  const subs: Subscription[] = [];
  subs.push(
    await p.bus.subscribe({ subjects: ['cog.sleeve.spawned.>', 'cog.sleeve.changed.>', 'cog.sleeve.decommissioned.>'] }, async (d) => {
      const id = d.data.sleeveId;
      if (typeof id === 'string') await sync(id);
    }),
  );
  subs.push(
    await p.bus.subscribe({ subjects: ['cog.block.mined'] }, async () => {
      await Promise.all([...instances.values()].filter((i) => i.row.embodimentType === 'mining').map((i) => tick(i.row.id)));
    }),
  );
  const offEpoch = p.epochs.onAdvance(() => {
    for (const i of instances.values()) if (i.row.embodimentType === 'memory') void tick(i.row.id);
  });
  await reconcile();
  const every = setInterval(() => void reconcile().catch(() => {}), opts.reconcileMs ?? 10_000);
  every.unref();

  return {
    running: () => [...instances.keys()],
    tick,
    reconcile,
    onTick(kind, handler) {
      handlers.set(kind, [...(handlers.get(kind) ?? []), handler]);
    },
    stats: () => ({ ...counters }),
    async close() {
      closed = true;
      clearInterval(every);
      offEpoch();
      await Promise.all(subs.map((s) => s.close().catch(() => {})));
      await Promise.all([...pending.values()]);
      await Promise.all([...instances.keys()].map(stop));
    },
  };
}
