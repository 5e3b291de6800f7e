// The memory read path, above the contexts it spans. Recall walks from the head (memory), then
// pays for it (sleeves, through the economy's ledger) and opens the low-fidelity residue (residues)
// in one transaction. Its hot path is two statements through the driver: the stack with its payer
// and the walk from its head (one read composed of the stacks' and sleeves' SELECTs and memory's
// walk query, which returns the payloads of the platform's own writes with their rows), and the
// spend with the read's drift (sleeves' spendForRead). A walk those rows do not cover (a gap in the
// stored chain, a payload PUT through the Hippocampus API) goes to the Hippocampus as before. The
// interactive transaction is kept for what the spend statement leaves to it (a refusal to report
// precisely, a residue to open).
import { sql } from '../lib/db/index.ts';
import { queryPrepared } from '../lib/db/statement.ts';
import type { Platform } from '../lib/platform.ts';
import { badRequest, notFound } from '../lib/errors.ts';
import { balanceOf, sleeveAccount } from '../subgraphs/economy/index.ts';
import { checkDepth, reconstruct, walkChainSql, RECALL_DRIFT_MILLI, RECALL_LEVEL_COST_MILLI, type ReconstructResult } from '../subgraphs/memory/index.ts';
import { openResidue } from '../subgraphs/residues/index.ts';
import {
  recordSleeveRead,
  requireActiveSleeve,
  requireKeyLease,
  requireSleeveOfStack,
  richestPayerSql,
  spendForRead,
  spendFromSleeve,
  type SleeveRow,
} from '../subgraphs/sleeves/index.ts';
import { stackReadSql, type StackReadRow } from '../subgraphs/stacks/index.ts';

type Payer = Pick<SleeveRow, 'id' | 'stackId'>;

/**
 * The stack (404 when unknown), without `sleeveId` its richest payer with that balance (units), and
 * the walk's rows from the stack's head (memory's walkChainSql: a few chunks, one a row, joined
 * LATERAL), in one statement through the driver. The walk reads `cap` levels, and with the payer
 * no more than its balance pays for.
 */
async function readStackAndPayer(
  p: Platform,
  stackId: string,
  withPayer: boolean,
  cap: number,
): Promise<{ stack: StackReadRow; payer: { sleeve: Payer; memory: number } | null; walk: string[] }> {
  if (typeof stackId !== 'string' || !stackId) throw notFound('Stack', String(stackId));
  const q = withPayer
    ? sql`SELECT st.id, st."episodicHead", st."masterSecret", pay.id AS "payerId", pay."stackId" AS "payerStackId", pay."memoryMilli", w.chunk
        FROM (${stackReadSql(stackId)}) st LEFT JOIN LATERAL (${richestPayerSql(sql`st.id`)}) pay ON true
        LEFT JOIN LATERAL (${walkChainSql(sql`st."episodicHead"`, sql`LEAST(${cap}::int, COALESCE(pay."memoryMilli"::bigint / 1000, 0))`)}) w ON true`
    : sql`SELECT st.id, st."episodicHead", st."masterSecret", w.chunk
        FROM (${stackReadSql(stackId)}) st LEFT JOIN LATERAL (${walkChainSql(sql`st."episodicHead"`, sql`${cap}::int`)}) w ON true`;
  const rows = await queryPrepared<StackReadRow & { payerId?: string | null; payerStackId?: string | null; memoryMilli?: string | null; chunk: string | null }>(
    p.db,
    q,
  );
  const row = rows[0];
  if (!row) throw notFound('Stack', stackId);
  const stack = { id: row.id, episodicHead: row.episodicHead, masterSecret: row.masterSecret };
  const payer = row.payerId ? { sleeve: { id: row.payerId, stackId: row.payerStackId! }, memory: Number(row.memoryMilli) / 1000 } : null;
  return { stack, payer, walk: rows.flatMap((r) => (r.chunk === null ? [] : [r.chunk])) };
}

const TX = { maxWait: 30_000, timeout: 30_000 } as const;

export interface RecallInput {
  stackId: string;
  sleeveId?: string;
  depth: unknown;
  memoryToken?: unknown;
}

export interface RecallResult extends ReconstructResult {
  stackId: string;
  sleeveId: string | null;
  effectiveDepth: number;
  cost: { memory: number };
  residueId: string | null;
}

/**
 * Recall: effective depth = min(depth, memoryToken, the payer's memory balance); 1 memory per level
 * walked, drift +0.1 on the payer; fidelity below the minimum opens a historical-non-canonical residue.
 */
export async function recall(p: Platform, input: RecallInput): Promise<RecallResult> {
  const depth = checkDepth(input.depth);
  if (input.memoryToken !== undefined && (typeof input.memoryToken !== 'number' || !Number.isFinite(input.memoryToken) || input.memoryToken < 0)) {
    throw badRequest('memoryToken must be a non-negative number', [{ path: 'memoryToken', message: 'is invalid' }]);
  }
  // Without a sleeve, the stack and its payer are one read; with one, the sleeve's reads (404 / 409
  // for the sleeve, 409 without a key lease) run beside the stack's, and an unknown stack is the
  // 404 whatever they found.
  const bySleeve = input.sleeveId;
  // min(depth, memoryToken): the effective depth before the payer's balance caps it.
  const cap = Math.min(depth, input.memoryToken === undefined ? Infinity : Math.floor(input.memoryToken as number));
  const stackRead = readStackAndPayer(p, input.stackId, bySleeve === undefined, cap);
  const sleeveRead =
    bySleeve === undefined
      ? null
      : (async (): Promise<{ sleeve: SleeveRow; memory: number }> => {
          const sleeve = await requireActiveSleeve(p.db.prisma, bySleeve);
          const [, balance] = await Promise.all([requireKeyLease(p.db.prisma, sleeve.id), balanceOf(p.db.prisma, sleeveAccount(sleeve.id))]);
          return { sleeve, memory: balance.memory };
        })();
  sleeveRead?.catch(() => {}); // awaited below, after the stack
  const { stack, payer: richest, walk } = await stackRead;
  const ofSleeve = sleeveRead ? await sleeveRead : null;
  if (ofSleeve) requireSleeveOfStack(ofSleeve.sleeve, stack.id);
  const read = ofSleeve ?? richest;
  const payer: Payer | null = read?.sleeve ?? null;
  const memory = read?.memory ?? 0;
  const epoch = p.epochs.current();
  const empty = {
    stackId: stack.id,
    sleeveId: payer?.id ?? null,
    head: stack.episodicHead,
    fragments: [],
    broken: [],
    fidelity: 1,
    levels: 0,
    effectiveDepth: 0,
    cost: { memory: 0 },
    residueId: null,
  };
  if (!payer) return empty;
  const balance = Math.floor(memory);
  const effectiveDepth = Math.max(0, Math.min(cap, balance));
  const result = effectiveDepth > 0 ? await reconstruct(p, stack, effectiveDepth, epoch, walk) : { ...empty };
  const payerId = payer.id;
  const reader = payer;
  // Onto reconstruct's fresh result: a spread copy with new members is V8's slow path (docs/decisions.md).
  const done: RecallResult = Object.assign(result, { stackId: stack.id, sleeveId: payerId, effectiveDepth, cost: { memory: result.levels }, residueId: null });
  // The hot path: the spend and the drift in one statement (nothing written when it declines).
  if (
    result.levels > 0 &&
    result.fidelity >= p.config.fidelityMin &&
    (await spendForRead(
      p.db,
      reader,
      { token: 'memory', milli: BigInt(result.levels) * RECALL_LEVEL_COST_MILLI },
      { head: result.head, driftMilli: RECALL_DRIFT_MILLI },
      { reason: 'recall', ref: payerId, epoch },
    ))
  ) {
    return done;
  }
  const residueId = await p.db.prisma.$transaction(async (tx) => {
    // Rows are locked in the writers' order (stack, balance, sleeve). A sleeve decommissioned
    // meanwhile has no tokens left (409 from the spend); recordSleeveRead is conditional on the
    // sleeve being alive and unfrozen (409 otherwise), which rolls the spend back.
    if (result.levels > 0) {
      await spendFromSleeve(tx, reader, [{ token: 'memory', milli: BigInt(result.levels) * RECALL_LEVEL_COST_MILLI }], {
        reason: 'recall',
        ref: payerId,
        epoch,
      });
    }
    await recordSleeveRead(tx, payerId, result.head, RECALL_DRIFT_MILLI);
    if (result.fidelity >= p.config.fidelityMin) return null;
    const { residue } = await openResidue(tx, {
      kind: 'historical-non-canonical',
      trigger: `recall fidelity ${result.fidelity.toFixed(3)} below ${p.config.fidelityMin}`,
      stackId: stack.id,
      sleeveId: payerId,
      epoch,
      evidence: { head: result.head, fidelity: result.fidelity, depth: effectiveDepth, broken: result.broken.slice(0, 64), ok: result.fragments.length },
      dedupeKey: `historical-non-canonical:${stack.id}:${result.head}:${epoch}`,
      expiryEpochs: p.config.residueExpiryEpochs,
    });
    return residue.id;
  }, TX);
  return { ...done, residueId };
}
