// The six needlecast steps and their compensations. Each step runs in one transaction that also
// records it on the Saga row, so a step is either done and persisted or not done at all; a crash
// between steps leaves a saga that recoverSagas can finish or undo exactly.
import type { Tx } from '../../../lib/db/index.ts';
import { Problem, conflict } from '../../../lib/errors.ts';
import { sha256Hex } from '../../../lib/crypto.ts';
import type { Platform } from '../../../lib/platform.ts';
import { enqueueChainTx } from '../../chains/index.ts';
import { SYSTEM, burn, mint, poolAccount, sleeveAccount, type Token } from '../../economy/index.ts';
import { sleeveMemory } from '../memory-port.ts';
import { getStackRow } from '../../stacks/index.ts';
import { addDrift, decommissionInTx, freezeSleeve, getSleeveRow, listAliveSleeves, spawnSleeve, unfreezeSleeve } from '../sleeves.ts';
import type { SagaRow, StepRecord } from './view.ts';

export const STEP_NAMES = ['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle'] as const;
export type StepName = (typeof STEP_NAMES)[number];
/** Name set 2 of the spec, step for step (anchor has none). */
export const STEP_ALIASES: Record<StepName, string | null> = {
  freeze: 'FREEZE',
  shard: 'SNAPSHOT and SHARD',
  pin: 'TRANSMIT',
  anchor: null,
  reconstruct: 'REASSEMBLE',
  settle: 'ACTIVATE',
};
export const MAX_SHARDS = 8;

/** Routing cost in milli: 5 + 0.1 x shards + 0.5 x |delta epoch| (spec: Limits). */
export const routingCostMilli = (shards: number, deltaEpoch: number) => 5000 + 100 * shards + 500 * Math.abs(deltaEpoch);

/** A spawned target carries this hostname, so a crash between spawn and record can find it. */
export const targetHostname = (sagaId: string) => `needlecast:${sagaId}`;

export class InjectedFailure extends Error {
  constructor(step: string) {
    super(`injected failure at step ${step}`);
    this.name = 'InjectedFailure';
  }
}

export interface StepContext {
  p: Platform;
  saga: SagaRow;
  steps: StepRecord[];
  tx: Tx;
  epoch: number;
  /** Throws an InjectedFailure inside the step's transaction when this step is the failure point. */
  fail(): void;
  /** What PREPARE returned for this step. */
  prep: Record<string, unknown>;
}

const data = (steps: StepRecord[], name: StepName) => (steps.find((s) => s.name === name)?.data ?? {}) as Record<string, unknown>;

/** The 8 most recent CIDs from the head, breadth-first, newest first within a level. */
export async function collectShards(p: Platform, head: string | null, tx?: Tx): Promise<string[]> {
  if (!head) return [];
  const memory = sleeveMemory(p);
  const out: string[] = [];
  const seen = new Set<string>([head]);
  let level = [head];
  while (level.length && out.length < MAX_SHARDS) {
    const metas = (await Promise.all(level.map((c) => memory.meta(p, c, tx)))).filter((m) => m !== null);
    metas.sort((a, b) => b!.epoch - a!.epoch);
    const next: string[] = [];
    for (const m of metas) {
      if (out.length < MAX_SHARDS) out.push(m!.cid);
      for (const l of m!.links) if (!seen.has(l)) seen.add(l), next.push(l);
    }
    level = next;
  }
  return out;
}

export function routeRecord(saga: SagaRow, steps: StepRecord[]) {
  return {
    sagaId: saga.id,
    stackId: saga.stackId,
    from: saga.fromSleeveId,
    to: saga.toSleeveId ?? saga.toKind,
    transferRoot: saga.transferRoot,
    shards: saga.shards,
    freezeEpoch: data(steps, 'freeze').epoch ?? null,
  };
}

export const routeHash = (saga: SagaRow, steps: StepRecord[]) => sha256Hex(JSON.stringify(routeRecord(saga, steps)));

type StepResult = { data: Record<string, unknown>; saga?: Partial<SagaRow> };

/**
 * Work a step does before its transaction: spawning (spawnSleeve has its own transaction) and the
 * DHF reconstruct (reads outside any transaction: PGlite has one connection).
 */
export const PREPARE: Partial<Record<StepName, (c: Omit<StepContext, 'tx' | 'prep'>) => Promise<Record<string, unknown>>>> = {
  async reconstruct({ p, saga }) {
    let targetId = saga.toSleeveId;
    let spawned = false;
    if (!targetId) {
      const found = (await listAliveSleeves(p.db.prisma, saga.stackId)).find((s) => s.hostname === targetHostname(saga.id));
      targetId = found?.id ?? (await spawnTarget(p, saga));
      spawned = true;
    }
    // The target derives the epoch keys afresh and loads the pinned shards from the transfer root.
    const got = new Set(await sleeveMemory(p).reassemble(p, saga.stackId, saga.transferRoot, MAX_SHARDS));
    const lost = saga.shards.filter((c) => !got.has(c));
    if (lost.length) throw conflict(`shards could not be reassembled: ${lost.join(', ')}`, 'SHARD_LOST');
    return { targetId, spawned, loaded: saga.shards.length };
  },
};

export const STEPS: Record<StepName, (c: StepContext) => Promise<StepResult>> = {
  async freeze({ saga, tx, epoch, fail }) {
    await freezeSleeve(tx, saga.fromSleeveId);
    const stack = await getStackRow(tx, saga.stackId);
    fail();
    return { data: { epoch, transferRoot: stack.episodicHead }, saga: { transferRoot: stack.episodicHead } };
  },

  async shard({ p, saga, tx, fail }) {
    const shards = await collectShards(p, saga.transferRoot, tx);
    fail();
    return { data: { count: shards.length }, saga: { shards } };
  },

  async pin({ p, saga, tx, epoch, fail }) {
    const memory = sleeveMemory(p);
    const pinned: string[] = [];
    for (const cid of saga.shards) {
      const meta = await memory.meta(p, cid, tx);
      if (!meta) throw conflict(`shard ${cid} is not on Hippocampus`, 'SHARD_LOST');
      if (meta.pinned) continue;
      await memory.pin(p, cid, tx);
      pinned.push(cid);
    }
    const memoryMilli = BigInt(pinned.length) * memory.pinCostMilli;
    if (memoryMilli > 0n) {
      await burn(tx, sleeveAccount(saga.fromSleeveId), [{ token: 'memory', milli: memoryMilli }], {
        reason: 'needlecast-pin',
        ref: saga.id,
        epoch,
        stackId: saga.stackId,
      });
    }
    fail();
    return { data: { pinned }, saga: { memoryMilli: Number(memoryMilli) } };
  },

  async anchor({ saga, steps, tx, epoch, fail }) {
    const hash = routeHash(saga, steps);
    // NeedlecastRouter record; the Cortex tx lands in the next fold's evmRoot, which Medulla mines.
    await enqueueChainTx(tx, { kind: 'route', ref: saga.id, epoch, payload: { ...routeRecord(saga, steps), routeHash: hash, status: 'routed' } });
    fail();
    return { data: { routeHash: hash } };
  },

  async reconstruct({ saga, tx, fail, prep }) {
    const targetId = prep.targetId as string;
    const t = await getSleeveRow(tx, targetId);
    if (!t.alive || t.frozen) throw conflict(`target sleeve ${targetId} is not active`, 'TARGET_NOT_ACTIVE');
    if (t.driftMilli !== 0) await addDrift(tx, targetId, -t.driftMilli); // resumes with drift 0
    fail();
    return { data: { ...prep, head: saga.transferRoot }, saga: { toSleeveId: targetId } };
  },

  async settle({ saga, steps, tx, epoch, fail }) {
    const delta = epoch - Number(data(steps, 'freeze').epoch ?? epoch);
    const milli = routingCostMilli(saga.shards.length, delta);
    await burn(tx, sleeveAccount(saga.fromSleeveId), [{ token: 'routing', milli: BigInt(milli) }], {
      reason: 'needlecast',
      ref: saga.id,
      epoch,
      stackId: saga.stackId,
    });
    await decommissionInTx(tx, epoch, saga.fromSleeveId, `needlecast ${saga.id} to ${saga.toSleeveId}`);
    fail();
    return { data: { routing: milli / 1000, deltaEpoch: delta }, saga: { routingMilli: milli, deltaEpoch: delta } };
  },
};

/** Spawned outside the step's transaction (spawnSleeve has its own); found again by hostname. */
async function spawnTarget(p: Platform, saga: SagaRow): Promise<string> {
  const s = await spawnSleeve(p, {
    stackId: saga.stackId,
    embodimentType: saga.toKind,
    kind: saga.toKind,
    tickRate: saga.toTickRate ?? undefined,
    hostname: targetHostname(saga.id),
    shape: saga.shape === 'B' ? 'B' : 'A',
  });
  return s.id;
}

/** Undoes every done step, newest first, in one transaction: the stack ends as before the saga. */
export async function compensate(p: Platform, saga: SagaRow, steps: StepRecord[], tx: Tx): Promise<void> {
  const epoch = p.epochs.current();
  const done = new Set(steps.filter((s) => s.status === 'done').map((s) => s.name));
  // A target spawned by a reconstruct that did not get recorded (crash or failure after spawn).
  const orphan = (await listAliveSleeves(tx, saga.stackId)).find((s) => s.hostname === targetHostname(saga.id));
  const rec = data(steps, 'reconstruct');
  const spawnedId = (rec.spawned ? (rec.targetId as string) : undefined) ?? orphan?.id;
  if (spawnedId) {
    const t = await getSleeveRow(tx, spawnedId);
    if (t.alive) {
      const retired = await decommissionInTx(tx, epoch, spawnedId, `needlecast ${saga.id} compensated`);
      // Its spawn grant went to the pool on decommission: burn it, so the stack holds what it held.
      const held = (retired.finalTokens ?? {}) as Record<string, number>;
      const moves = Object.entries(held)
        .filter(([, v]) => Number(v) > 0)
        .map(([token, v]) => ({ token: token as Token, milli: BigInt(Math.round(Number(v) * 1000)) }));
      if (moves.length) await burn(tx, poolAccount(saga.stackId), moves, { reason: 'needlecast-retire', ref: saga.id, epoch, stackId: saga.stackId });
    }
  }
  if (done.has('anchor')) {
    await enqueueChainTx(tx, {
      kind: 'route',
      ref: `${saga.id}:abort`,
      epoch,
      payload: { sagaId: saga.id, status: 'compensated', routeHash: data(steps, 'anchor').routeHash },
    });
  }
  const source = await getSleeveRow(tx, saga.fromSleeveId);
  if (done.has('pin') && saga.memoryMilli > 0) {
    // Pins are permanent (spec: Memory node), so the shards stay pinned; the tokens come back.
    const to = source.alive ? sleeveAccount(source.id) : poolAccount(saga.stackId);
    await mint(tx, to, [{ token: 'memory', milli: BigInt(saga.memoryMilli) }], {
      reason: 'needlecast-refund',
      ref: saga.id,
      epoch,
      stackId: saga.stackId,
      from: SYSTEM.burn,
    });
  }
  if (done.has('freeze') && source.alive && source.frozen) await unfreezeSleeve(tx, source.id);
}

export const isClientProblem = (e: unknown): e is Problem => e instanceof Problem && e.status >= 400 && e.status < 500;
