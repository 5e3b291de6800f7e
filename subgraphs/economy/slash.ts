// Slashing an equivocating Thalamus operator (spec: Coherence root, item 8). An operator is bonded
// on first sight with OPERATOR_BOND routing minted to `operator:<pubkey>`; each equivocation burns
// SLASH_AMOUNT of it (at most what is left). Idempotent per (operator, epoch).
import type { Tx } from '../../lib/db/index.ts';
import { recordEvent } from '../../lib/events.ts';
import type { Platform } from '../../lib/platform.ts';
import type { Subscription } from '../../lib/bus/port.ts';
import { SYSTEM, fromMilli, post, toMilli } from './ledger.ts';
import { enqueueChainTx } from '../chains/index.ts';

export const OPERATOR_BOND = 1000;
export const SLASH_AMOUNT = 100;
export const operatorAccount = (operator: string) => `operator:${operator}`;

export interface SlashResult {
  operator: string;
  epoch: number;
  slashed: number;
  remaining: number;
  duplicate: boolean;
}

async function milliOf(tx: Tx, account: string): Promise<bigint> {
  const row = await tx.balance.findUnique({ where: { account_token: { account, token: 'routing' } } });
  return row?.milli ?? 0n;
}

/**
 * Whether the bond or slash transfer `txId` was posted. Only those two reasons' entries are indexed
 * by txId (LedgerEntry_bond_slash_txId_idx): the condition is written out so the planner uses it.
 */
async function hasTx(tx: Tx, txId: string): Promise<boolean> {
  const [row] = await tx.$queryRaw<Array<{ found: boolean }>>`
    SELECT EXISTS (SELECT 1 FROM "LedgerEntry" WHERE "txId" = ${txId} AND reason IN ('bond', 'slash')) AS found`;
  return row?.found === true;
}

export async function slashOperator(p: Platform, input: { operator: string; epoch: number; reason?: string }): Promise<SlashResult> {
  const { operator, epoch } = input;
  const account = operatorAccount(operator);
  return p.db.prisma.$transaction(async (tx) => {
    // Serialises concurrent slashes of one operator across processes.
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${account}))`;
    const bondTx = `bond:${operator}`;
    if (!(await hasTx(tx, bondTx))) {
      await post(tx, {
        txId: bondTx,
        reason: 'bond',
        ref: account,
        epoch,
        legs: [
          { account: SYSTEM.treasury, token: 'routing', milli: -toMilli(OPERATOR_BOND) },
          { account, token: 'routing', milli: toMilli(OPERATOR_BOND) },
        ],
      });
    }
    const slashTx = `slash:${operator}:${epoch}`;
    if (await hasTx(tx, slashTx)) {
      return { operator, epoch, slashed: 0, remaining: fromMilli(await milliOf(tx, account)), duplicate: true };
    }
    const have = await milliOf(tx, account);
    // biome-ignore lint/complexity/useMathMinMax: bigint milli-units; Math.min takes numbers
    const take = have < toMilli(SLASH_AMOUNT) ? have : toMilli(SLASH_AMOUNT);
    // A zero-amount slash still writes a marker entry pair so a replay stays a duplicate.
    await post(tx, {
      txId: slashTx,
      reason: 'slash',
      ref: account,
      epoch,
      legs: [
        { account, token: 'routing', milli: -take },
        { account: SYSTEM.burn, token: 'routing', milli: take },
      ],
    });
    if (take === 0n) {
      await tx.ledgerEntry.createMany({
        data: [
          { txId: slashTx, account, token: 'routing', milli: 0n, reason: 'slash', ref: account, epoch },
          { txId: slashTx, account: SYSTEM.burn, token: 'routing', milli: 0n, reason: 'slash', ref: account, epoch },
        ],
      });
    }
    const slashed = fromMilli(take);
    const remaining = fromMilli(have - take);
    await enqueueChainTx(tx, {
      kind: 'burn',
      ref: `ledger:${slashTx}`,
      epoch,
      payload: { operator, amounts: [{ token: 'routing', milli: take.toString() }], reason: 'slash' },
    });
    await recordEvent(tx, {
      subject: 'cog.treasury.slashed',
      type: 'treasury.slashed',
      msgId: `treasury-slashed:${operator}:${epoch}`,
      data: { operator, epoch, slashed, remaining, reason: input.reason ?? 'routing-equivocation' },
    });
    return { operator, epoch, slashed, remaining, duplicate: false };
  });
}

/** Durable consumer of `cog.treasury.slash` {operator, epoch}; malformed messages are dropped. */
export async function startSlashConsumer(p: Platform): Promise<Subscription> {
  return p.bus.subscribe({ subjects: ['cog.treasury.slash'], durable: 'treasury-slash' }, async (d) => {
    const { operator, epoch, reason } = d.data as { operator?: unknown; epoch?: unknown; reason?: unknown };
    if (typeof operator !== 'string' || !/^[0-9a-f]{1,128}$/i.test(operator) || typeof epoch !== 'number' || !Number.isInteger(epoch) || epoch < 0) {
      p.log.warn({ subject: d.subject }, 'treasury: malformed slash request dropped');
      return;
    }
    await slashOperator(p, { operator: operator.toLowerCase(), epoch, reason: typeof reason === 'string' ? reason : undefined });
  });
}
