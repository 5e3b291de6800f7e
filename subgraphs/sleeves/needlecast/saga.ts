// The needlecast saga: moves a stack's running state from one sleeve to another in six ordered
// steps, each persisted before the next starts, compensating on failure so the stack ends as it
// was. A repeated request with the same saga id returns that saga; recoverSagas (router start)
// finishes or compensates every saga left in flight.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../../lib/db/index.ts';
import { Problem, badRequest, conflict, insufficientTokens, notFound } from '../../../lib/errors.ts';
import { recordEvent } from '../../../lib/events.ts';
import type { Platform } from '../../../lib/platform.ts';
import { balanceOf, fromMilli, sleeveAccount } from '../../economy/index.ts';
import { sleeveMemory } from '../memory-port.ts';
import { getStackRow } from '../../stacks/index.ts';
import { MAX_TICK_RATE_MS, MIN_TICK_RATE_MS, SLEEVE_KINDS, requireActiveSleeve, requireSleeveOfStack } from '../sleeves.ts';
import {
  InjectedFailure,
  PREPARE,
  STEPS,
  STEP_ALIASES,
  STEP_NAMES,
  collectShards,
  compensate,
  isClientProblem,
  routingCostMilli,
  type StepName,
} from './steps.ts';
import { sagaView, type SagaRow, type SagaView, type StepRecord } from './view.ts';

export const SAGA_ID_RE = /^needle:[0-9a-f]{16,64}$/;

export interface NeedlecastRequest {
  /** Source sleeve id. */
  from: string;
  /** Target: an alive sleeve id of the same stack, or an embodiment type to spawn. */
  to: string;
  sagaId?: string;
  toTickRate?: number;
  /** Shape B names the stack; the source must belong to it. */
  stackId?: string;
  shape?: 'A' | 'B';
}

export interface SagaOptions {
  /** Test-only failure injection: the step's transaction throws after its effects. */
  failAt?: StepName;
  /** Test-only crash simulation: stop (leave the saga running) after this step is persisted. */
  stopAfter?: StepName;
  /** Called once a step is persisted (fault tests crash the router here). */
  afterStep?: (step: StepName, sagaId: string) => void;
}

const inflight = new Map<string, Promise<SagaView>>();

const stepEvent = (saga: SagaRow, step: string, status: string) => ({
  subject: 'cog.needlecast.step',
  type: 'needlecast.step',
  data: { sagaId: saga.id, stackId: saga.stackId, step, alias: (STEP_ALIASES as Record<string, string | null>)[step] ?? null, status },
  msgId: `needlecast:${saga.id}:${step}:${status}`,
});

export async function getSagaRow(db: Db, sagaId: string): Promise<SagaRow> {
  const row = typeof sagaId === 'string' ? await db.saga.findUnique({ where: { id: sagaId } }) : null;
  if (!row) throw notFound('Saga', String(sagaId));
  return row;
}

export async function getSaga(p: Platform, sagaId: string): Promise<SagaView> {
  return sagaView(await getSagaRow(p.db.prisma, sagaId));
}

function parseTickRate(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_TICK_RATE_MS || (v > 0 && v < MIN_TICK_RATE_MS)) {
    throw badRequest(`toTickRate must be 0 (event-driven) or an integer from ${MIN_TICK_RATE_MS} to ${MAX_TICK_RATE_MS} ms`, [
      { path: 'toTickRate', message: 'is out of range' },
    ]);
  }
  return v;
}

/** Starts (or returns, for a known saga id) a needlecast; resolves when it completed or compensated. */
export async function runNeedlecast(p: Platform, req: NeedlecastRequest, opts: SagaOptions = {}): Promise<SagaView> {
  if (req.sagaId !== undefined && (typeof req.sagaId !== 'string' || !SAGA_ID_RE.test(req.sagaId))) {
    throw badRequest('sagaId must have the form needle:<16 to 64 lowercase hex>', [{ path: 'sagaId', message: 'is invalid' }]);
  }
  if (req.sagaId) {
    const known = await p.db.prisma.saga.findUnique({ where: { id: req.sagaId } });
    if (known) return inflight.get(known.id) ?? sagaView(known);
  }
  const source = await requireActiveSleeve(p.db.prisma, req.from);
  if (req.stackId !== undefined) {
    await getStackRow(p.db.prisma, req.stackId);
    requireSleeveOfStack(source, req.stackId);
  }
  const toTickRate = parseTickRate(req.toTickRate);
  let toSleeveId: string | null = null;
  let toKind: string;
  if ((SLEEVE_KINDS as readonly string[]).includes(req.to)) {
    toKind = req.to;
  } else if (typeof req.to === 'string' && req.to.startsWith('sleeve:')) {
    const target = await requireActiveSleeve(p.db.prisma, req.to);
    if (target.id === source.id) throw badRequest('from and to are the same sleeve', [{ path: 'to', message: 'is the source' }]);
    requireSleeveOfStack(target, source.stackId);
    toSleeveId = target.id;
    toKind = target.embodimentType;
  } else {
    throw badRequest(`to must be a sleeve id or one of ${SLEEVE_KINDS.join(', ')}`, [{ path: 'to', message: 'is not a sleeve or kind' }]);
  }

  // Refuse up front what the saga could not pay for (402 names token, required, available).
  const stack = await getStackRow(p.db.prisma, source.stackId);
  const shards = await collectShards(p, stack.episodicHead);
  const memoryPort = sleeveMemory(p);
  const unpinned = (await Promise.all(shards.map((c) => memoryPort.meta(p, c)))).filter((m) => m && !m.pinned).length;
  const held = await balanceOf(p.db.prisma, sleeveAccount(source.id));
  const routing = fromMilli(routingCostMilli(shards.length, 0));
  if (held.routing < routing) throw insufficientTokens('routing', routing, held.routing);
  const memory = fromMilli(BigInt(unpinned) * memoryPort.pinCostMilli);
  if (held.memory < memory) throw insufficientTokens('memory', memory, held.memory);

  const id = req.sagaId ?? `needle:${randomBytes(16).toString('hex')}`;
  const steps: StepRecord[] = STEP_NAMES.map((name) => ({ name, alias: STEP_ALIASES[name], status: 'pending', at: null, data: {} }));
  try {
    await p.db.prisma.$transaction(async (tx) => {
      const row = await tx.saga.create({
        data: {
          id,
          stackId: source.stackId,
          fromSleeveId: source.id,
          toSleeveId,
          toKind,
          toTickRate,
          status: 'running',
          steps: steps as never,
          shape: req.shape ?? 'A',
        },
      });
      await recordEvent(tx, stepEvent(row, 'start', 'running'));
    });
  } catch (e) {
    if ((e as { code?: string }).code === 'P2002' || /unique/i.test(String((e as Error).message))) {
      return inflight.get(id) ?? getSaga(p, id); // the same saga id raced in: idempotent
    }
    throw e;
  }
  const run = execute(p, id, opts).finally(() => inflight.delete(id));
  inflight.set(id, run);
  return run;
}

/** Runs the saga's remaining steps; on a failure compensates and rethrows client problems. */
async function execute(p: Platform, id: string, opts: SagaOptions): Promise<SagaView> {
  let row = await getSagaRow(p.db.prisma, id);
  const steps = (row.steps as unknown as StepRecord[]).map((s) => ({ ...s }));
  for (let i = row.step; i < STEP_NAMES.length; i++) {
    const name = STEP_NAMES[i]!;
    const fail = () => {
      if (opts.failAt === name) throw new InjectedFailure(name);
    };
    try {
      const epoch = p.epochs.current();
      const prep = (await PREPARE[name]?.({ p, saga: row, steps, epoch, fail })) ?? {};
      row = await p.db.prisma.$transaction(
        async (tx) => {
          const cur = await tx.saga.findUniqueOrThrow({ where: { id } });
          if (cur.status !== 'running' || cur.step !== i) throw conflict(`saga ${id} moved on elsewhere (${cur.status}, step ${cur.step})`, 'SAGA_MOVED');
          const r = await STEPS[name]({ p, saga: cur, steps, tx, epoch, fail, prep });
          steps[i] = { ...steps[i]!, status: 'done', at: new Date().toISOString(), data: r.data };
          const last = i === STEP_NAMES.length - 1;
          const updated = await tx.saga.update({
            where: { id },
            data: { ...(r.saga as object), step: i + 1, steps: steps as never, status: last ? 'completed' : 'running' },
          });
          await recordEvent(tx, stepEvent(updated, name, 'done'));
          if (last) await recordEvent(tx, stepEvent(updated, 'saga', 'completed'));
          return updated;
        },
        { timeout: 30_000, maxWait: 30_000 },
      );
      opts.afterStep?.(name, id);
      if (opts.stopAfter === name) return sagaView(row);
    } catch (e) {
      if (e instanceof Problem && e.code === 'SAGA_MOVED') return getSaga(p, id);
      steps[i] = { ...steps[i]!, status: 'failed', at: new Date().toISOString(), data: { error: (e as Error).message } };
      const view = await compensateSaga(p, id, steps, `${name}: ${(e as Error).message}`);
      if (isClientProblem(e)) throw new Problem(e.status, e.code, e.title, e.detail, { ...e.extra, sagaId: id, sagaStatus: view.status }, e.headers);
      if (!(e instanceof InjectedFailure)) p.log.error({ sagaId: id, step: name, err: (e as Error).message }, 'needlecast: step failed, compensated');
      return view;
    }
  }
  return sagaView(row);
}

/** compensating (persisted first) -> every done step undone in one transaction -> compensated. */
async function compensateSaga(p: Platform, id: string, steps: StepRecord[], error: string): Promise<SagaView> {
  await p.db.prisma.saga.update({ where: { id }, data: { status: 'compensating', error: error.slice(0, 1000), steps: steps as never } });
  try {
    const row = await p.db.prisma.$transaction(
      async (tx) => {
        const cur = await tx.saga.findUniqueOrThrow({ where: { id } });
        await compensate(p, cur, steps, tx);
        const undone = steps.map((s) => (s.status === 'done' ? { ...s, status: 'compensated' } : s));
        const updated = await tx.saga.update({ where: { id }, data: { status: 'compensated', steps: undone as never, routingMilli: 0, memoryMilli: 0 } });
        await recordEvent(tx, stepEvent(updated, 'saga', 'compensated'));
        return updated;
      },
      { timeout: 30_000, maxWait: 30_000 },
    );
    return sagaView(row);
  } catch (e) {
    p.log.error({ sagaId: id, err: (e as Error).message }, 'needlecast: compensation failed; recoverSagas retries it');
    return getSaga(p, id);
  }
}

/** At router start: finish every running saga (compensating on failure), and finish compensations. */
export async function recoverSagas(p: Platform, opts: SagaOptions = {}): Promise<{ completed: string[]; compensated: string[] }> {
  const rows = await p.db.prisma.saga.findMany({ where: { status: { in: ['running', 'compensating'] } }, orderBy: { createdAt: 'asc' } });
  const out = { completed: [] as string[], compensated: [] as string[] };
  for (const r of rows) {
    if (inflight.has(r.id)) continue;
    let view: SagaView;
    if (r.status === 'compensating') {
      view = await compensateSaga(p, r.id, r.steps as unknown as StepRecord[], r.error ?? 'recovered while compensating');
    } else {
      const run = execute(p, r.id, opts)
        .catch(async () => getSaga(p, r.id))
        .finally(() => inflight.delete(r.id));
      inflight.set(r.id, run);
      view = await run;
    }
    (view.status === 'completed' ? out.completed : out.compensated).push(r.id);
  }
  return out;
}
