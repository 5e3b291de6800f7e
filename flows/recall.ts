// The memory read path, above the contexts it spans. Recall walks from the head (memory), then
// pays for it (sleeves, through the economy's ledger) and opens the low-fidelity residue (residues)
// in one transaction.
import type { Platform } from '../lib/platform.ts';
import { badRequest } from '../lib/errors.ts';
import { balanceOf, sleeveAccount } from '../subgraphs/economy/index.ts';
import { checkDepth, reconstruct, RECALL_DRIFT_MILLI, RECALL_LEVEL_COST_MILLI, type ReconstructResult } from '../subgraphs/memory/index.ts';
import { openResidue } from '../subgraphs/residues/index.ts';
import {
  recordSleeveRead,
  requireActiveSleeve,
  requireKeyLease,
  requireSleeveOfStack,
  richestMemoryPayer,
  spendFromSleeve,
  type SleeveRow,
} from '../subgraphs/sleeves/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';

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
  // The stack and the payer are read at once (the payer's reads do not need the stack row); an
  // unknown stack is the 404 whatever the payer's reads found.
  const stackRead = getStackRow(p.db.prisma, input.stackId);
  const payerRead = (async (): Promise<{ sleeve: SleeveRow; memory: number } | null> => {
    if (input.sleeveId === undefined) return richestMemoryPayer(p.db.prisma, input.stackId);
    const sleeve = await requireActiveSleeve(p.db.prisma, input.sleeveId);
    const [, balance] = await Promise.all([requireKeyLease(p.db.prisma, sleeve.id), balanceOf(p.db.prisma, sleeveAccount(sleeve.id))]);
    return { sleeve, memory: balance.memory };
  })();
  payerRead.catch(() => {}); // awaited below, after the stack
  const stack = await stackRead;
  const read = await payerRead;
  if (read && input.sleeveId !== undefined) requireSleeveOfStack(read.sleeve, stack.id);
  const payer: SleeveRow | null = read?.sleeve ?? null;
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
  const effectiveDepth = Math.max(0, Math.min(depth, input.memoryToken === undefined ? Infinity : Math.floor(input.memoryToken as number), balance));
  const result = effectiveDepth > 0 ? await reconstruct(p, stack, effectiveDepth, epoch) : { ...empty };
  const payerId = payer.id;
  const reader = payer;
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
  return { ...result, stackId: stack.id, sleeveId: payerId, effectiveDepth, cost: { memory: result.levels }, residueId };
}
