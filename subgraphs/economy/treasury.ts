// The Treasury: per-epoch emission of the four core tokens per stack, scaled by the CPV and
// decayed by the stack's EBC binding, accrued as claimable; a claim moves it into the stack pool.
// Emission is one set-based SQL statement per epoch so 10,000 stacks fit inside a 4 s epoch.
import type { Db, Tx } from '../../lib/db/index.ts';
import { recordEvent } from '../../lib/events.ts';
import type { Platform } from '../../lib/platform.ts';
import { enqueueChainTx } from '../chains/index.ts';
import { getStackRow } from '../stacks/index.ts';
import { listAliveSleeves } from '../sleeves/index.ts';
import {
  CORE_TOKENS, TOKENS, balancesOf, claimableAccount, fromMilli, poolAccount, sleeveAccount, transfer,
  type Token, type TokenAmounts,
} from './ledger.ts';

/** Units of each core token emitted per stack per epoch before scaling (spec: Limits). */
export const EMISSION_PER_EPOCH = 100;

export type CoreAmounts = Record<(typeof CORE_TOKENS)[number], number>;
export interface Cpv { syncCoeff: number; memoryCoeff: number; computeCoeff: number; residueCoeff: number; routingCoeff: number }

export interface EmissionEvent {
  id: string;
  stackId: string;
  epoch: number;
  amounts: CoreAmounts;
  cpv: Cpv;
  ebcFactor: number;
  createdAt: string;
}

export const COEFF: Record<Token, keyof Cpv> = {
  compute: 'computeCoeff', memory: 'memoryCoeff', sync: 'syncCoeff', routing: 'routingCoeff', residue: 'residueCoeff',
};

/** EBC decay: max(floor, e^(-decayRate x delta epoch)); delta never negative. */
export function ebcFactor(binding: { floor: number; decayRate: number }, deltaEpoch: number): number {
  return Math.max(binding.floor, Math.exp(-binding.decayRate * Math.max(0, deltaEpoch)));
}

interface StackEconomics extends Cpv { bindingFloor: number; bindingDecay: number; lastActiveEpoch: number }
export const cpvOf = (s: Cpv): Cpv => ({
  syncCoeff: s.syncCoeff, memoryCoeff: s.memoryCoeff, computeCoeff: s.computeCoeff, residueCoeff: s.residueCoeff, routingCoeff: s.routingCoeff,
});

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * Emits epoch `epoch` for every stack that has not had it yet. It runs as the epoch begins, so its
 * EBC delta counts the quiet epochs before it: a stack active in the epoch that just ended (epoch -
 * 1) is not decayed at all, one quiet since epoch a gets e^(-decay x (epoch - 1 - a)).
 * Emission @@unique(stackId, epoch) makes it idempotent, also across concurrent emitters. Ledger
 * entries, balances, events and the chain intent are written by the same statement / transaction.
 */
export async function emitEpoch(p: Platform, epoch: number): Promise<{ epoch: number; stacks: number }> {
  const ts = Date.now();
  return p.db.prisma.$transaction(async (tx) => {
    const rows = await tx.$queryRawUnsafe<{ n: number; compute: string | null; memory: string | null; sync: string | null; routing: string | null }[]>(
      `WITH s AS (
        SELECT id, "computeCoeff", "memoryCoeff", "syncCoeff", "routingCoeff", "residueCoeff",
          GREATEST("bindingFloor", EXP(-"bindingDecay" * GREATEST(0, $1::int - 1 - "lastActiveEpoch"))) AS ebc
        FROM "Stack"
      ), m AS (
        SELECT s.*, ROUND(${EMISSION_PER_EPOCH * 1000} * "computeCoeff" * ebc)::bigint AS c,
          ROUND(${EMISSION_PER_EPOCH * 1000} * "memoryCoeff" * ebc)::bigint AS mm,
          ROUND(${EMISSION_PER_EPOCH * 1000} * "syncCoeff" * ebc)::bigint AS sy,
          ROUND(${EMISSION_PER_EPOCH * 1000} * "routingCoeff" * ebc)::bigint AS r
        FROM s
      ), ins AS (
        INSERT INTO "Emission" (id, "stackId", epoch, amounts, cpv, "ebcFactor")
        SELECT 'emission:' || id || ':' || $1::int, id, $1::int,
          jsonb_build_object('compute', c / 1000.0, 'memory', mm / 1000.0, 'sync', sy / 1000.0, 'routing', r / 1000.0),
          jsonb_build_object('syncCoeff', "syncCoeff", 'memoryCoeff', "memoryCoeff", 'computeCoeff', "computeCoeff", 'residueCoeff', "residueCoeff", 'routingCoeff', "routingCoeff"),
          ebc
        FROM m
        ON CONFLICT ("stackId", epoch) DO NOTHING
        RETURNING "stackId", amounts, "ebcFactor"
      ), legs AS (
        SELECT ins."stackId", 'claimable:' || ins."stackId" AS account, t.token,
          CASE t.token WHEN 'compute' THEN m.c WHEN 'memory' THEN m.mm WHEN 'sync' THEN m.sy ELSE m.r END AS milli
        FROM ins JOIN m ON m.id = ins."stackId"
        CROSS JOIN (VALUES ('compute'), ('memory'), ('sync'), ('routing')) AS t(token)
      ), tsum AS (
        SELECT token, SUM(milli)::bigint AS milli FROM legs GROUP BY token
      ), le AS (
        -- One posting per epoch: a credit per stack and token, one treasury debit per token.
        INSERT INTO "LedgerEntry" ("txId", account, token, milli, reason, ref, epoch)
        SELECT 'emission:' || $1::int, account, token, milli, 'emission', 'emission:' || "stackId" || ':' || $1::int, $1::int FROM legs WHERE milli <> 0
        UNION ALL
        SELECT 'emission:' || $1::int, 'treasury', token, -milli, 'emission', 'emission:' || $1::int, $1::int FROM tsum WHERE milli <> 0
        RETURNING 1
      ), bal AS (
        INSERT INTO "Balance" (account, token, milli) SELECT account, token, milli FROM legs WHERE milli <> 0
        ON CONFLICT (account, token) DO UPDATE SET milli = "Balance".milli + EXCLUDED.milli
        RETURNING 1
      ), ev AS (
        INSERT INTO "EventOutbox" (subject, "msgId", data)
        SELECT 'cog.treasury.emitted.' || "stackId", 'treasury-emitted:' || "stackId" || ':' || $1::int,
          jsonb_build_object('type', 'treasury.emitted', 'ts', $2::bigint, 'stackId', "stackId", 'epoch', $1::int, 'amounts', amounts, 'ebcFactor', "ebcFactor")
        FROM ins
        RETURNING 1
      )
      SELECT (SELECT COUNT(*)::int FROM ins) AS n,
        (SELECT milli::text FROM tsum WHERE token = 'compute') AS compute, (SELECT milli::text FROM tsum WHERE token = 'memory') AS memory,
        (SELECT milli::text FROM tsum WHERE token = 'sync') AS sync, (SELECT milli::text FROM tsum WHERE token = 'routing') AS routing,
        (SELECT COUNT(*) FROM le) + (SELECT COUNT(*) FROM bal) + (SELECT COUNT(*) FROM ev) AS touched`,
      epoch, ts,
    );
    const n = rows[0]?.n ?? 0;
    if (n > 0) {
      const r = rows[0]!;
      // One QuellistTreasury record per epoch; tokens are minted to a stack on chain when claimed.
      await enqueueChainTx(tx, {
        kind: 'emission', ref: `emission:${epoch}`, epoch,
        payload: { epoch, stacks: n, totalsMilli: { compute: r.compute ?? '0', memory: r.memory ?? '0', sync: r.sync ?? '0', routing: r.routing ?? '0' } },
      });
    }
    return { epoch, stacks: n };
  }, { timeout: 120_000 });
}

export function emissionView(r: { id: string; stackId: string; epoch: number; amounts: unknown; cpv: unknown; ebcFactor: number; createdAt: Date }): EmissionEvent {
  const a = r.amounts as Record<string, number>;
  return {
    id: r.id, stackId: r.stackId, epoch: r.epoch,
    amounts: { compute: Number(a.compute), memory: Number(a.memory), sync: Number(a.sync), routing: Number(a.routing) },
    cpv: r.cpv as Cpv, ebcFactor: r.ebcFactor, createdAt: r.createdAt.toISOString(),
  };
}

/** The last 100 emission events of a stack, newest first (404 for an unknown stack). */
export async function issuance(p: Platform, stackId: string, limit = 100): Promise<EmissionEvent[]> {
  await getStackRow(p.db.prisma, stackId);
  const rows = await p.db.prisma.emission.findMany({ where: { stackId }, orderBy: { epoch: 'desc' }, take: limit });
  return rows.map(emissionView);
}

export interface ClaimResult { stackId: string; claimable: CoreAmounts }

/** Moves everything claimable into the stack pool; returns what moved (zeros when nothing). */
export async function claim(p: Platform, stackId: string): Promise<ClaimResult> {
  await getStackRow(p.db.prisma, stackId);
  const epoch = p.epochs.current();
  return p.db.prisma.$transaction(async (tx) => {
    // Row locks serialise concurrent claims: the second sees what the first left (zero).
    const rows = await tx.$queryRaw<{ token: string; milli: bigint }[]>`SELECT token, milli FROM "Balance" WHERE account = ${claimableAccount(stackId)} FOR UPDATE`;
    const moves = rows.filter((r) => r.milli > 0n && (CORE_TOKENS as readonly string[]).includes(r.token)).map((r) => ({ token: r.token as Token, milli: BigInt(r.milli) }));
    const claimed: CoreAmounts = { compute: 0, memory: 0, sync: 0, routing: 0 };
    if (!moves.length) return { stackId, claimable: claimed };
    const txId = await transfer(tx, claimableAccount(stackId), poolAccount(stackId), moves, { reason: 'claim', ref: `claim:${stackId}`, epoch });
    for (const m of moves) claimed[m.token as keyof CoreAmounts] = fromMilli(m.milli);
    await enqueueChainTx(tx, { kind: 'mint', ref: `ledger:${txId}`, epoch, payload: { stackId, amounts: moves.map((m) => ({ token: m.token, milli: m.milli.toString() })), reason: 'claim' } });
    await recordEvent(tx, { subject: `cog.treasury.claimed.${stackId}`, type: 'treasury.claimed', data: { stackId, epoch, claimed }, msgId: `treasury-claimed:${txId}` });
    return { stackId, claimable: claimed };
  });
}

/** What a stack could claim now, without claiming. */
export async function claimableOf(db: Db | Tx, stackId: string): Promise<CoreAmounts> {
  const b = (await balancesOf(db, [claimableAccount(stackId)])).get(claimableAccount(stackId))!;
  return { compute: b.compute, memory: b.memory, sync: b.sync, routing: b.routing };
}

export interface StackBalancesB {
  raw: TokenAmounts;
  effective: TokenAmounts;
  cpv: Cpv;
  lastActiveEpoch: number;
  currentEpoch: number;
  ebcFactor: number;
}

/** Shape B balances: raw = alive sleeves + pool; effective = raw x coeff x EBC (residue: no decay). */
export async function stackBalancesB(p: Platform, stackId: string): Promise<StackBalancesB> {
  const stack = (await getStackRow(p.db.prisma, stackId)) as unknown as StackEconomics;
  const sleeves = await listAliveSleeves(p.db.prisma, stackId);
  const accounts = [poolAccount(stackId), ...sleeves.map((s: { id: string }) => sleeveAccount(s.id))];
  const byAccount = await balancesOf(p.db.prisma, accounts);
  const currentEpoch = p.epochs.current();
  const factor = ebcFactor({ floor: stack.bindingFloor, decayRate: stack.bindingDecay }, currentEpoch - stack.lastActiveEpoch);
  const cpv = cpvOf(stack);
  const raw = {} as TokenAmounts;
  const effective = {} as TokenAmounts;
  for (const t of TOKENS) {
    let milli = 0;
    for (const a of byAccount.values()) milli += Math.round(a[t] * 1000);
    raw[t] = milli / 1000;
    effective[t] = round3(raw[t] * cpv[COEFF[t]] * (t === 'residue' ? 1 : factor));
  }
  return { raw, effective, cpv, lastActiveEpoch: stack.lastActiveEpoch, currentEpoch, ebcFactor: factor };
}
