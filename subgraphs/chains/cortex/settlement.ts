// The ledger's mirror on Cortex by net effect. A mint or burn of the ledger is a ChainLedgerIntent
// row (a ledger row, written in the ledger's own statement) that is never sent alone: once its epoch
// has ended, the submitter folds every pending ledger row into settlements, each one
// BandwidthToken.settle call carrying, per stack and token, the net of the rows in id order (the
// order they committed), and links the rows to it (settlementId, status 'settled'). The settle row
// (a ChainOutbox row) then goes the way of any intent (signed, stored, broadcast, confirmed,
// re-sent); its ledger rows are not written again: their outcome is the settle row's. The
// settlement id on chain is the settle row's id, and the contract applies an id once, so a
// settlement sent again changes nothing. See docs/decisions.md.
import { CHAIN_TOKENS } from './artifacts.ts';
import { amountsToChain, IntentError, type TokenIdOf } from './calls.ts';

/** At most this many (stack, token) entries per settle call (gas: about 10k each; blocks hold 30M). */
export const MAX_SETTLEMENT_ENTRIES = 200;

/** One (stack, token) line of a settlement: the signed net, milli-units (> 0 minted, < 0 burned). */
export interface SettlementEntry {
  stackId: string;
  tokenId: number;
  /** Token index on Cortex (CHAIN_TOKENS). */
  token: number;
  delta: string;
}

/** The payload of a `settle` outbox row. */
export interface SettlementPayload {
  /** The settle row's id as a decimal string (written right after the row is created). */
  settlementId?: string;
  /** The newest epoch among its ledger rows. */
  epoch: number;
  entries: SettlementEntry[];
  /** How many ledger rows it carries. */
  rows: number;
}

export interface LedgerRow {
  id: bigint;
  kind: string;
  payload: unknown;
  epoch: number | null;
}

/** A group of stacks settled in one call, with the ledger rows it carries. */
export interface SettlementPlan {
  epoch: number;
  entries: SettlementEntry[];
  rowIds: bigint[];
  /** tokenId -> that stack's ledger rows in this plan (to take a stack out when its part reverts). */
  byStack: Map<number, bigint[]>;
}

/**
 * Nets ledger rows (in id order) per stack and token and cuts them into plans of at most
 * MAX_SETTLEMENT_ENTRIES entries, a stack never split over two. Rows that can never become a chain
 * effect (no stack, no identity token, bad amounts) come back as invalid.
 */
export async function planSettlements(
  rows: LedgerRow[],
  tokenIdOf: TokenIdOf,
): Promise<{ plans: SettlementPlan[]; invalid: { row: LedgerRow; error: string }[] }> {
  const invalid: { row: LedgerRow; error: string }[] = [];
  // Per stack, in the order its first row committed: the net per token and its rows.
  const stacks = new Map<number, { stackId: string; net: bigint[]; rowIds: bigint[]; epoch: number }>();
  for (const row of rows) {
    const p = (row.payload ?? {}) as Record<string, unknown>;
    try {
      if (typeof p.stackId !== 'string' || !p.stackId) throw new IntentError('payload.stackId must be a non-empty string');
      const tokenId = typeof p.tokenId === 'number' && Number.isSafeInteger(p.tokenId) ? p.tokenId : await tokenIdOf(p.stackId);
      if (tokenId === undefined) throw new IntentError(`no identity token for ${p.stackId}`);
      const { kinds, values } = amountsToChain(p.amounts);
      if (!kinds.length) throw new IntentError(`nothing to ${row.kind}`);
      let s = stacks.get(tokenId);
      if (!s) stacks.set(tokenId, (s = { stackId: p.stackId, net: CHAIN_TOKENS.map(() => 0n), rowIds: [], epoch: 0 }));
      kinds.forEach((k, i) => (s.net[k] += row.kind === 'mint' ? values[i] : -values[i]));
      s.rowIds.push(row.id);
      s.epoch = Math.max(s.epoch, row.epoch ?? 0);
    } catch (e) {
      if (!(e instanceof IntentError)) throw e;
      invalid.push({ row, error: `invalid intent: ${e.message}` });
    }
  }
  const plans: SettlementPlan[] = [];
  let plan: SettlementPlan | undefined;
  for (const [tokenId, s] of stacks) {
    const entries = s.net.flatMap((d, token) => (d === 0n ? [] : [{ stackId: s.stackId, tokenId, token, delta: d.toString() }]));
    if (!plan || plan.entries.length + entries.length > MAX_SETTLEMENT_ENTRIES) {
      plan = { epoch: 0, entries: [], rowIds: [], byStack: new Map() };
      plans.push(plan);
    }
    plan.entries.push(...entries);
    plan.rowIds.push(...s.rowIds);
    plan.byStack.set(tokenId, s.rowIds);
    plan.epoch = Math.max(plan.epoch, s.epoch);
  }
  return { plans, invalid };
}

/** Takes one stack out of a plan (its entries and rows). */
export function withoutStack(plan: SettlementPlan, tokenId: number): SettlementPlan {
  const drop = new Set(plan.byStack.get(tokenId) ?? []);
  const byStack = new Map(plan.byStack);
  byStack.delete(tokenId);
  return {
    epoch: plan.epoch,
    entries: plan.entries.filter((e) => e.tokenId !== tokenId),
    rowIds: plan.rowIds.filter((id) => !drop.has(id)),
    byStack,
  };
}

/** BandwidthToken.settle's arguments from a settle row's payload. */
export function settleArgs(payload: Record<string, unknown>): [bigint, number, number[], number[], bigint[]] {
  const p = payload as unknown as SettlementPayload;
  if (typeof p.settlementId !== 'string' || !/^\d+$/.test(p.settlementId)) throw new IntentError('payload.settlementId must be a decimal string');
  if (!Number.isSafeInteger(p.epoch) || p.epoch < 0) throw new IntentError('payload.epoch must be a non-negative integer');
  if (!Array.isArray(p.entries)) throw new IntentError('payload.entries must be a list');
  const ids: number[] = [];
  const kinds: number[] = [];
  const deltas: bigint[] = [];
  for (const e of p.entries) {
    if (!e || !Number.isSafeInteger(e.tokenId) || !Number.isInteger(e.token) || e.token < 0 || e.token >= CHAIN_TOKENS.length)
      throw new IntentError('settlement entry must be {tokenId, token, delta}');
    let d: bigint;
    try {
      d = BigInt(e.delta);
    } catch {
      throw new IntentError('settlement entry delta is not an integer');
    }
    if (d === 0n) throw new IntentError('settlement entry delta is zero');
    ids.push(e.tokenId);
    kinds.push(e.token);
    deltas.push(d);
  }
  return [BigInt(p.settlementId), p.epoch, ids, kinds, deltas];
}
