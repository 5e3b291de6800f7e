// The sleeve runtime. Any number of them share the alive sleeves through leases in the database
// (leases.ts; docs/scale.md, "Sleeves across many runtimes"): every half lease a runtime renews its
// one beat row (which renews every lease it holds), fences the runtimes whose beat lapsed, and
// claims free leases up to its fair share (alive sleeves / live runtimes, the remainder to the first
// by id) or releases its surplus over it, so a joining runtime gets sleeves within a lease and a
// dead one's sleeves are taken one lease after its last beat. Embedded mode runs one, which holds
// every sleeve.
//
// For the sleeves it holds, a runtime follows the bus (cog.sleeve.spawned/changed/decommissioned)
// and, every reconcile interval, re-reads the rows whose running changed since its last re-read
// (an event it missed). Each gets its identity at
// `/sleeves/<id>/identity` on the runtime's one listener (its port is the sleeve's identityPort)
// and, unless frozen, a tick at its kind's rate: human and ai from the runtime's one timer wheel
// (wheel.ts), memory once per epoch, mining on each mined block. A tick is the heartbeat
// (fenced by the lease: a read, no row written) plus the kind's upkeep, reported on
// `cog.sleeve.tick`, one event per batch of ticks; it never writes the Sleeve row, perceives, spends
// tokens or changes drift. A failing tick is logged and reported in that event with ok:false; the
// loop goes on.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { FastifyInstance } from 'fastify';
import { createHttp, listen } from '../../../lib/http.ts';
import { notFound } from '../../../lib/errors.ts';
import { sleeveTickLateness } from '../../../lib/metrics.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { Subscription } from '../../../lib/bus/port.ts';
import type { SleeveRow } from '../view.ts';
import { sleeveRunChanges } from '../sleeves.ts';
import { sleeveMemory } from '../memory-port.ts';
import {
  claim,
  claimOne,
  endBeat,
  fairShare,
  fenceLapsed,
  fencedTick,
  fencedTicks,
  heldBy,
  register,
  release,
  renewBeat,
  survey,
  type Holder,
} from './leases.ts';
import { timerWheel, type Due } from './wheel.ts';

/** Kind-specific upkeep a host may register (journaling, inference...); runs inside the tick. */
export type TickHandler = (sleeve: SleeveRow, p: Platform) => Promise<void> | void;

interface Instance {
  row: SleeveRow;
  /** The generation of its wheel entry: a reschedule bumps it, and the old entry is dropped. */
  gen: number;
  /** When the next timer tick is due (Date.now() ms): ticks keep their cadence, a re-read of the row does not restart it. */
  dueAt?: number;
  ticking: boolean;
  /** Its last tick here (ms): where a change to how it ticks restarts its cadence. */
  lastTickAt?: number;
}

/** Whether a re-read row changes how the sleeve ticks (anything else keeps its cadence). */
const tickingChanged = (a: SleeveRow, b: SleeveRow) =>
  a.tickRate !== b.tickRate || a.frozen !== b.frozen || a.alive !== b.alive || a.embodimentType !== b.embodimentType;

export interface SleeveRuntime {
  /** This runtime's name in its leases (the same across restarts, so a restart takes its sleeves back at once). */
  readonly id: string;
  /** The port of its identity listener. */
  readonly port: number;
  /** Its name and generation in the leases (undefined before its first round). */
  lease(): Holder | undefined;
  /** Sleeve ids with a running instance (the leases it holds). */
  running(): string[];
  /** Runs one tick now (tests, event-driven kinds). */
  tick(sleeveId: string): Promise<boolean>;
  /** One lease round (heartbeat, renew, claim or release to the fair share), then a re-read of its sleeves' rows. */
  reconcile(): Promise<void>;
  onTick(kind: string, handler: TickHandler): void;
  /** Tick counts, the fair share and live runtimes of its last round, and the wheel's lateness (how long after its due time a timer tick started; p99 over the last 4096). */
  stats(): {
    ticks: number;
    failures: number;
    /** Ticks the lease refused (the runtime no longer held it), and timer ticks skipped because the last was still running. */
    fenced: number;
    busy: number;
    /** Lease rounds run, and their total time. */
    rounds: number;
    roundMs: number;
    /** Sleeve rows the re-reads read (all held at the first, then only the changed ones). */
    reread: number;
    share: number;
    runtimes: number;
    maxLateMs: number;
    lateP99Ms: number;
  };
  /** Stops renewing, heartbeating and ticking without handing anything back (what kill -9 leaves; tests). */
  abandon(): Promise<void>;
  /** Stops, handing its leases back so the others take them at their next round. */
  close(): Promise<void>;
}

export interface RuntimeOptions {
  /** How often the held sleeves' rows are re-read (missed events); default 10 s. */
  reconcileMs?: number;
  /** Lease (and heartbeat) lifetime; renewed every half. Default: the epoch interval. */
  leaseMs?: number;
  /**
   * The name in the leases; default COG_SLEEVE_RUNTIME_ID, or `sleeve-runtime` (`.2`, `.3` for more
   * in one process). A process that finds a newer one registered under its id goes on under the id
   * with a random suffix.
   */
  id?: string;
  /** The identity listener's port; default SLEEVE_RUNTIME_PORT (0: a free one). */
  port?: number;
  /** Its share of the alive sleeves relative to the other runtimes' weights; default COG_SLEEVE_RUNTIME_WEIGHT (1). 0: a standby. */
  weight?: number;
}

/**
 * Where in its period a sleeve's timer ticks fall (ms past a multiple of `rate` since the epoch): a
 * function of its id (FNV-1a), the same in every runtime, so a sleeve keeps its cadence when another
 * runtime takes it over.
 */
export function tickPhase(sleeveId: string, rate: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < sleeveId.length; i++) h = Math.imul(h ^ sleeveId.charCodeAt(i), 0x01000193);
  return (h >>> 0) % rate;
}

/**
 * The timer wheel's quantum: the sleeves due within 25 ms tick as one batch (one fence statement,
 * one event). Without it the batches were as small as the database was fast: at 50,000 sleeves
 * ticking every 8 s a runtime sent a fence statement and a JetStream publish every few
 * milliseconds, and a fifth of its CPU went to socket writes (bench/scale.ts 1000000 --profile).
 */
export const TICK_QUANTUM_MS = 25;
/**
 * The longest quantum: a slow sleeve's ticks batch over a 64th of its period, up to this. With every
 * sleeve on 25 ms, a few hundred human sleeves (8 s) made a batch of two or three every 25-40 ms:
 * an idle embedded platform with 400 of them ran the fence statement 25 times a second (1.2 ms
 * each on PGlite, two thirds of what its database calls grew by over an idle platform with none).
 * A human sleeve's tick is then at most 125 ms late, 1.6% of its period; an ai sleeve's (2 s) 31 ms.
 */
export const MAX_TICK_QUANTUM_MS = 125;

/** The quantum a sleeve's ticks are batched over: a 64th of its period, within [TICK_QUANTUM_MS, MAX_TICK_QUANTUM_MS]. */
export const tickQuantum = (tickRate: number): number => Math.min(MAX_TICK_QUANTUM_MS, Math.max(TICK_QUANTUM_MS, Math.floor(tickRate / 64)));

let started = 0;
/** Most leases one round claims (a runtime fills a share of 50,000 in five rounds, 2.5 leases). */
export const CLAIM_BATCH = 10_000;

export async function startRuntime(p: Platform, opts: RuntimeOptions = {}): Promise<SleeveRuntime> {
  const baseId = opts.id ?? `${p.config.sleeveRuntimeId ?? 'sleeve-runtime'}${started++ ? `.${started}` : ''}`;
  let me = baseId;
  /** Its name and generation in the leases, once registered. */
  let holder: Holder | undefined;
  /** The leases it holds (its own account, kept with each claim, release and stop). */
  const leased = new Set<string>();
  /** A round failed midway: the next reads what it holds from the leases. */
  let resync = false;
  const leaseMs = opts.leaseMs ?? p.config.epochIntervalMs;
  const weight = opts.weight ?? p.config.sleeveRuntimeWeight;
  const instances = new Map<string, Instance>();
  const handlers = new Map<string, TickHandler[]>();
  const counters = { ticks: 0, failures: 0, fenced: 0, busy: 0, maxLateMs: 0, rounds: 0, roundMs: 0, reread: 0 };
  const late = new Float64Array(4096);
  let lateN = 0;
  const pending = new Map<string, Promise<void>>();
  const view = { share: 0, runtimes: [] as string[], weights: [] as number[], sleeves: 0 };
  let closed = false;
  let round: Promise<void> | undefined;

  const wheel = timerWheel({
    quantumMs: TICK_QUANTUM_MS,
    current: (d) => instances.get(d.id)?.gen === d.gen,
    fire: (d) => {
      due.push(d);
      if (!draining) setImmediate(drain);
    },
  });

  async function upkeep(row: SleeveRow): Promise<void> {
    if (row.embodimentType === 'memory') await sleeveMemory(p).checkPinnedShards(p, row.stackId, row.id);
    for (const h of handlers.get(row.embodimentType) ?? []) await h(row, p);
  }

  /** One sleeve's tick as `cog.sleeve.tick` reports it. */
  interface Ticked {
    sleeveId: string;
    stackId: string;
    kind: string;
    ok: boolean;
    error?: string;
  }
  const ticked = (inst: Instance, error?: string): Ticked => ({
    sleeveId: inst.row.id,
    stackId: inst.row.stackId,
    kind: inst.row.embodimentType,
    ok: error === undefined,
    ...(error === undefined ? {} : { error }),
  });

  /** What follows a tick's fence: the kind's upkeep (a failure is logged and reported, the loop goes on). */
  async function afterTick(inst: Instance, now: Date): Promise<Ticked> {
    inst.lastTickAt = now.getTime();
    try {
      await upkeep(inst.row);
      counters.ticks++;
      return ticked(inst);
    } catch (e) {
      return failed(inst, e as Error);
    }
  }

  function failed(inst: Instance, e: Error): Ticked {
    counters.failures++;
    p.log.warn({ sleeveId: inst.row.id, err: e.message }, 'sleeve tick failed; the loop continues');
    return ticked(inst, e.message);
  }

  /**
   * One `cog.sleeve.tick` event for the ticks of a batch (each with its outcome), not one per tick:
   * at 100,000 sleeves ticking every 8 s, an event per tick was 12,500 JetStream publishes a second,
   * most of a runtime's CPU, and a stream whose retention held 80 s of everything else
   * (docs/decisions.md, "One tick event per batch").
   */
  async function report(ticks: Ticked[], now: Date): Promise<void> {
    if (!ticks.length) return;
    try {
      await p.bus.publish('cog.sleeve.tick', { type: 'sleeve.tick', ts: now.getTime(), runtime: me, sleeves: ticks });
    } catch (e) {
      p.log.warn({ err: (e as Error).message, ticks: ticks.length }, 'sleeve runtime: tick event not published');
    }
  }

  const tickable = (inst: Instance | undefined): inst is Instance => !!inst && !inst.row.frozen && inst.row.alive && !inst.ticking && !closed;

  async function tick(id: string): Promise<boolean> {
    const inst = instances.get(id);
    if (inst?.ticking) counters.busy++;
    if (!tickable(inst)) return false;
    inst.ticking = true;
    const now = new Date();
    let t: Ticked;
    try {
      if (!holder || !(await fencedTick(p.db, holder, id))) {
        counters.fenced++;
        return false;
      }
      t = await afterTick(inst, now);
    } catch (e) {
      t = failed(inst, e as Error);
    } finally {
      inst.ticking = false;
    }
    await report([t], now);
    return t.ok;
  }

  /**
   * The wheel's due sleeves, ticked in batches: one fence statement per 500 (fencedTicks), then
   * each one's upkeep, then one event for the batch.
   * Batches run one after another, so ticks never take more than one connection, and a slower
   * database makes bigger batches rather than a longer queue of small ones.
   */
  const due: Due[] = [];
  let flushing: Promise<void> = Promise.resolve();
  let draining = false;
  /** Ticks what is due, up to 500 a statement, until nothing is left: what comes due while a batch runs joins the next one. */
  function drain(): void {
    if (draining) return;
    draining = true;
    flushing = (async () => {
      try {
        while (due.length) await tickBatch(due.splice(0, 500));
      } catch (e) {
        p.log.warn({ err: (e as Error).message }, 'sleeve runtime: tick batch failed');
      } finally {
        draining = false;
      }
    })();
  }
  async function tickBatch(batch: Due[]): Promise<void> {
    const insts = new Map<string, Instance>();
    const started = Date.now();
    for (const d of batch) {
      // Lateness: how long after its due time the sleeve's tick starts.
      counters.maxLateMs = Math.max(counters.maxLateMs, started - d.at);
      late[lateN++ % late.length] = started - d.at;
      sleeveTickLateness.observe(Math.max(0, started - d.at) / 1000);
      const inst = instances.get(d.id);
      if (inst?.gen !== d.gen) continue;
      if (inst.ticking) counters.busy++;
      if (tickable(inst)) insts.set(d.id, inst);
    }
    for (const inst of insts.values()) inst.ticking = true;
    try {
      const now = new Date();
      let passed: Set<string>;
      try {
        passed = new Set(holder ? await fencedTicks(p.db, holder, [...insts.keys()]) : []);
      } catch (e) {
        await report(
          [...insts.values()].map((inst) => failed(inst, e as Error)),
          now,
        );
        return;
      }
      const done: Ticked[] = [];
      await Promise.all(
        [...insts.values()].map(async (inst) => {
          if (passed.has(inst.row.id)) return void done.push(await afterTick(inst, now));
          // Refused by the lease (another runtime holds it, this one's beat lapsed) or the sleeve
          // (frozen, dead): the next round or the sleeve's event sorts it out.
          counters.fenced++;
        }),
      );
      await report(done, now);
    } finally {
      for (const inst of insts.values()) inst.ticking = false;
      for (const d of batch) {
        const inst = instances.get(d.id);
        if (inst && inst.gen === d.gen) schedule(inst);
      }
    }
  }

  /**
   * Puts the sleeve's next tick on the wheel, every tickRate ms on a fixed cadence (a slow tick
   * does not push the next one back; ticks missed while the process was busy are not made up).
   * `from`: when the cadence (re)starts; otherwise the next tick is one tickRate after the last due one.
   */
  function schedule(inst: Instance, from?: number): void {
    inst.gen++;
    const { embodimentType: kind, tickRate, frozen, alive } = inst.row;
    if (closed || frozen || !alive || kind === 'memory' || kind === 'mining' || tickRate <= 0) {
      inst.dueAt = undefined;
      return;
    }
    const now = Date.now();
    const next = from !== undefined || inst.dueAt === undefined ? (from ?? now) + tickRate : inst.dueAt + tickRate;
    inst.dueAt = Math.max(next, now);
    wheel.add({ at: inst.dueAt, id: inst.row.id, gen: inst.gen, quantumMs: tickQuantum(tickRate) } satisfies Due);
  }

  /**
   * Where a sleeve this runtime just took starts its cadence: its last point on its own grid
   * (tickPhase), so the next tick comes one period later. A sleeve keeps its phase across a handover
   * or a restart without any runtime writing down its last tick, and sleeves claimed together come
   * due spread over the period, not in one instant.
   */
  function firstFrom(row: SleeveRow): number {
    const now = Date.now();
    const rate = row.tickRate;
    if (rate <= 0) return now;
    return now - ((((now - tickPhase(row.id, rate)) % rate) + rate) % rate);
  }

  const server: FastifyInstance = createHttp({ name: 'sleeve-runtime', log: p.log, metrics: false });
  server.get<{ Params: { id: string } }>('/sleeves/:id/identity', async (req) => {
    const cur = instances.get(req.params.id)?.row;
    if (!cur) throw notFound('Sleeve', req.params.id);
    return { sleeveId: cur.id, kind: cur.embodimentType, stackId: cur.stackId, hostname: cur.hostname ?? os.hostname() };
  });
  const port = await listen(server, 'sleeve runtime identity', p.config.host, opts.port ?? p.config.sleeveRuntimePort);

  /** Stops running a sleeve here (its lease is released, lost or gone with the sleeve). */
  async function stop(id: string): Promise<void> {
    return stopMany([id]);
  }

  /**
   * Stops running these sleeves here: their identityPort is cleared 1,000 to a statement. (A
   * statement each let a runtime that lost 50,000 leases at once fill the pool with single updates
   * for minutes: bench/scale.ts at 100,000 sleeves.)
   */
  async function stopMany(ids: string[]): Promise<void> {
    const gone: string[] = [];
    for (const id of ids) {
      const inst = instances.get(id);
      if (!inst) continue;
      instances.delete(id);
      inst.gen++;
      gone.push(id);
    }
    for (let i = 0; i < gone.length; i += 1000)
      await p.db.prisma.sleeve.updateMany({ where: { id: { in: gone.slice(i, i + 1000) }, identityPort: port }, data: { identityPort: null } }).catch(() => {});
  }

  /**
   * Starts the sleeves whose leases this runtime holds and does not run yet: their rows, with
   * identityPort set to its listener. A lease whose sleeve is no longer alive went with it.
   */
  async function start(ids: string[]): Promise<void> {
    const fresh = ids.filter((id) => !instances.has(id));
    for (let i = 0; i < fresh.length; i += 1000) {
      const chunk = fresh.slice(i, i + 1000);
      const rows = await p.db.prisma.sleeve.updateManyAndReturn({
        where: { id: { in: chunk }, alive: true },
        data: { identityPort: port },
      });
      const alive = new Set(rows.map((r) => r.id));
      for (const id of chunk) if (!alive.has(id)) leased.delete(id);
      for (const row of rows) {
        if (closed || instances.has(row.id)) continue;
        const inst: Instance = { row, gen: 0, ticking: false };
        instances.set(row.id, inst);
        schedule(inst, firstFrom(row));
      }
    }
  }

  // One sync per sleeve at a time, so a burst of events cannot start a sleeve twice.
  function sync(id: string, claimIt = false): Promise<void> {
    const prev = pending.get(id) ?? Promise.resolve();
    const next = prev
      .then(async () => {
        if (closed) return;
        const inst = instances.get(id);
        if (!inst) {
          // A spawn: take it if this runtime is under its share and nobody holds it yet (between
          // rounds, which keep the leases' account).
          if (claimIt)
            await exclusive(async () => {
              if (closed || !holder || leased.size >= fairShare(view.sleeves + 1, view.runtimes, me, view.weights, weight)) return;
              if (!(await claimOne(p.db.prisma, holder, id))) return;
              leased.add(id);
              view.sleeves++;
              await start([id]);
            });
          return;
        }
        const row = await p.db.prisma.sleeve.findUnique({ where: { id } });
        if (!row?.alive) return gone(id);
        // The reconcile pass and every sleeve event re-read the row; only a change to how it ticks
        // re-schedules it (from the last tick, so a new rate applies from there), else it keeps its cadence.
        const before = inst.row;
        inst.row = row;
        if (!tickingChanged(before, row)) return;
        schedule(inst, inst.lastTickAt !== undefined && !before.frozen ? inst.lastTickAt : Date.now());
      })
      .catch((e) => p.log.warn({ sleeveId: id, err: (e as Error).message }, 'sleeve runtime: sync failed'))
      .finally(() => {
        if (pending.get(id) === next) pending.delete(id);
      });
    pending.set(id, next);
    return next;
  }

  /** A sleeve that died here: stopped, and its lease went with it (the decommission trigger). */
  async function gone(id: string): Promise<void> {
    leased.delete(id);
    await stop(id);
  }

  /** Lease rounds and spawn claims one at a time, so `leased` and the beat's `held` agree. */
  let chain: Promise<unknown> = Promise.resolve();
  function exclusive<T>(f: () => Promise<T>): Promise<T> {
    const r = chain.then(f);
    chain = r.catch(() => {});
    return r;
  }

  /**
   * One lease round: renew the beat (every lease it holds with it), fence the runtimes whose beat
   * lapsed, then claim up to the fair share or release the surplus. O(runtimes) when nothing moves,
   * plus the leases that do.
   */
  async function leaseRound(): Promise<void> {
    if (closed) return;
    const db = p.db.prisma;
    if (!holder) holder = await register(db, me, port, leaseMs, weight);
    else {
      const { state, ended } = await renewBeat(db, holder, port, leaseMs);
      // Leases gone with their sleeve (decommissioned): stopped here if the sleeve event has not done it.
      for (const id of ended) leased.delete(id);
      await stopMany(ended);
      if (state !== 'live') {
        // Fenced (its beat lapsed: the others may have taken any of its sleeves) or superseded (a
        // newer process runs under this id and takes them back): stop everything, register anew.
        p.log.warn({ runtime: me, state, held: leased.size }, 'sleeve runtime: lost its leases; registering again');
        const all = [...instances.keys()];
        leased.clear();
        await stopMany(all);
        if (state === 'superseded') me = `${baseId}~${randomBytes(3).toString('hex')}`;
        holder = await register(db, me, port, leaseMs, weight);
        resync = false;
      }
    }
    if (resync) {
      const mine = new Set(await heldBy(db, holder));
      await stopMany([...instances.keys()].filter((id) => !mine.has(id)));
      leased.clear();
      for (const id of mine) leased.add(id);
      resync = false;
    }
    await fenceLapsed(db, me);
    const s = await survey(db);
    view.runtimes = s.runtimes;
    view.weights = s.weights;
    view.sleeves = s.sleeves;
    view.share = fairShare(s.sleeves, s.runtimes, me, s.weights, weight);
    if (closed) return;
    if (leased.size > view.share) {
      // Stop ticking first, then hand back: the next holder never overlaps with this one.
      const surplus = [...leased].slice(view.share);
      for (const id of surplus) leased.delete(id);
      await stopMany(surplus);
      await release(db, holder, surplus);
    } else if (leased.size < view.share && s.free.length) {
      // Its own earlier generation's first (a restart takes its sleeves back), then the unheld, then
      // the fenced runtimes'. At most CLAIM_BATCH a round, so a round stays bounded while a runtime
      // fills its share (the first of many to start would otherwise claim every sleeve, and its next
      // rounds outlast the lease).
      const rank = (r: string) => (r === me ? 0 : r === '' ? 1 : 2);
      const from = [...s.free].sort((a, b) => rank(a.runtime) - rank(b.runtime));
      for (const id of await claim(db, holder, Math.min(CLAIM_BATCH, view.share - leased.size), from)) leased.add(id);
    }
    await start([...leased]);
  }

  async function rebalance(): Promise<void> {
    // One round at a time; a caller during one waits for it and runs its own.
    while (round) await round.catch(() => {});
    const t0 = performance.now();
    round = exclusive(leaseRound)
      .catch((e) => {
        // Whether its last statement took effect is unknown: the next round reads what it holds.
        resync = true;
        throw e;
      })
      .finally(() => {
        round = undefined;
        counters.rounds++;
        counters.roundMs += performance.now() - t0;
      });
    return round;
  }

  /** Where the next re-read goes on from: the xmin of the last one's snapshot (none yet: a full read). */
  let runXmin: bigint | undefined;
  /**
   * Re-reads the rows of the sleeves it holds whose running changed (an event it missed): the first
   * time all of them, then only the rows stamped since the last read (`sleeveRunChanges`), so a
   * quiet minute costs an index probe, not a read of every sleeve held.
   */
  async function reread(): Promise<void> {
    const rows = new Map<string, SleeveRow>();
    let ids: string[];
    let xmin: bigint;
    if (runXmin === undefined) {
      xmin = (await sleeveRunChanges(p.db.prisma, null)).xmin;
      ids = [...instances.keys()];
      for (let i = 0; i < ids.length; i += 1000)
        for (const r of await p.db.prisma.sleeve.findMany({ where: { id: { in: ids.slice(i, i + 1000) } } })) rows.set(r.id, r);
    } else {
      const changed = await sleeveRunChanges(p.db.prisma, runXmin);
      xmin = changed.xmin;
      for (const r of changed.rows) if (instances.has(r.id)) rows.set(r.id, r);
      ids = [...rows.keys()];
    }
    counters.reread += ids.length;
    await Promise.all(
      ids.map(async (id) => {
        const inst = instances.get(id);
        const row = rows.get(id);
        if (!inst) return;
        if (!row?.alive) return gone(id);
        const before = inst.row;
        inst.row = row;
        if (tickingChanged(before, row)) schedule(inst, inst.lastTickAt !== undefined && !before.frozen ? inst.lastTickAt : Date.now());
      }),
    );
    runXmin = xmin;
  }

  async function reconcile(): Promise<void> {
    await rebalance();
    await reread();
  }

  const subs: Subscription[] = [];
  subs.push(
    await p.bus.subscribe({ subjects: ['cog.sleeve.spawned.>', 'cog.sleeve.changed.>', 'cog.sleeve.decommissioned.>'] }, async (d) => {
      const id = d.data.sleeveId;
      if (typeof id === 'string') await sync(id, d.subject.startsWith('cog.sleeve.spawned.'));
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
  await rebalance();
  const rounds = setInterval(() => void rebalance().catch((e) => p.log.warn({ err: (e as Error).message }, 'sleeve runtime: lease round failed')), leaseMs / 2);
  rounds.unref();
  const rereads = setInterval(() => void reread().catch(() => {}), opts.reconcileMs ?? 10_000);
  rereads.unref();

  async function halt(): Promise<string[]> {
    closed = true;
    clearInterval(rounds);
    clearInterval(rereads);
    offEpoch();
    wheel.stop();
    await Promise.all(subs.map((s) => s.close().catch(() => {})));
    await Promise.all([...pending.values()]);
    await round?.catch(() => {});
    await chain;
    await flushing.catch(() => {});
    await server.close().catch(() => {});
    return [...instances.keys()];
  }

  return {
    get id() {
      return me;
    },
    port,
    lease: () => holder && { ...holder },
    running: () => [...instances.keys()],
    tick,
    reconcile,
    onTick(kind, handler) {
      handlers.set(kind, [...(handlers.get(kind) ?? []), handler]);
    },
    stats: () => {
      const xs = Array.from(late.subarray(0, Math.min(lateN, late.length))).sort((a, b) => a - b);
      const lateP99Ms = xs.length ? xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]! : 0;
      return {
        ticks: counters.ticks,
        failures: counters.failures,
        fenced: counters.fenced,
        busy: counters.busy,
        rounds: counters.rounds,
        roundMs: counters.roundMs,
        reread: counters.reread,
        share: view.share,
        runtimes: view.runtimes.length,
        maxLateMs: counters.maxLateMs,
        lateP99Ms,
      };
    },
    async abandon() {
      await halt();
      instances.clear();
    },
    async close() {
      const running = await halt();
      await stopMany(running);
      if (!holder) return;
      await release(p.db.prisma, holder, [...leased]).catch(() => {});
      await endBeat(p.db.prisma, holder).catch(() => {});
    },
  };
}
