// The double-entry ledger for the five tokens. Every mint, burn, transfer, grant and slash is a
// set of entries that sums to zero per token, in integer milli-units, written in the caller's
// transaction beside the change it pays for. Balances are materialised in the Balance table in the
// same transaction (sum of entries, checked by tests); debits are a conditional UPDATE, so two
// concurrent spends can never take a balance below zero.
import { randomUUID } from 'node:crypto';
import { sql, sqlIdent, type Db, type Sql, type Tx } from '../../lib/db/index.ts';
import { joinParts, jsonValue, type ReadPart, type StatementPart } from '../../lib/db/statement.ts';
import { insufficientTokens } from '../../lib/errors.ts';
import { chainIntentsPart, enqueueChainTx } from '../chains/index.ts';

export const TOKENS = ['compute', 'memory', 'sync', 'routing', 'residue'] as const;
export type Token = (typeof TOKENS)[number];
export const CORE_TOKENS = ['compute', 'memory', 'sync', 'routing'] as const;
export type TokenAmounts = Record<Token, number>;

/** System accounts may go negative (they are where tokens come from and go to). */
export const SYSTEM = { treasury: 'treasury', faucet: 'faucet', burn: 'burn', bounty: 'bounty' } as const;
const isSystem = (account: string) => (Object.values(SYSTEM) as string[]).includes(account);

export const sleeveAccount = (sleeveId: string) => `sleeve:${sleeveId}`;
export const poolAccount = (stackId: string) => `pool:${stackId}`;
export const claimableAccount = (stackId: string) => `claimable:${stackId}`;

export const toMilli = (units: number): bigint => BigInt(Math.round(units * 1000));
export const fromMilli = (milli: bigint | number): number => Number(milli) / 1000;
export const zeroAmounts = (): TokenAmounts => ({ compute: 0, memory: 0, sync: 0, routing: 0, residue: 0 });

/** Adds `b` into `total`, exact to the milli-unit (a sum of balances read as units). */
export function addAmounts(total: TokenAmounts, b: TokenAmounts): TokenAmounts {
  for (const k of TOKENS) total[k] = (Math.round(total[k] * 1000) + Math.round(b[k] * 1000)) / 1000;
  return total;
}

export interface Leg {
  account: string;
  token: Token;
  /** Signed: negative debits the account. */
  milli: bigint;
}

export interface Posting {
  reason: string;
  ref?: string;
  epoch: number;
  legs: Leg[];
  txId?: string;
}

/**
 * Writes one balanced posting. Throws a 402 Problem (and the caller's transaction rolls back)
 * when a non-system account would go below zero. System accounts (treasury, faucet, burn, bounty)
 * keep no Balance row: their balance is the sum of their ledger entries (`systemBalance`). Every
 * posting touches one of them, so a row each would be one lock that all writes of all stacks queue
 * on (in PostgreSQL, held to commit: about half of perceive throughput).
 */
export async function post(tx: Tx, p: Posting): Promise<string> {
  const sums = new Map<string, bigint>();
  for (const l of p.legs) sums.set(l.token, (sums.get(l.token) ?? 0n) + l.milli);
  for (const [token, sum] of sums) if (sum !== 0n) throw new Error(`unbalanced posting for ${token}: ${sum}`);
  const txId = p.txId ?? randomUUID();
  const legs = orderedLegs(p.legs);
  for (const l of legs) {
    if (l.milli < 0n && !isSystem(l.account)) {
      const need = -l.milli;
      const updated =
        await tx.$executeRaw`UPDATE "Balance" SET milli = milli - ${need} WHERE account = ${l.account} AND token = ${l.token} AND milli >= ${need}`;
      if (updated === 0) {
        const row = await tx.balance.findUnique({ where: { account_token: { account: l.account, token: l.token } } });
        throw insufficientTokens(l.token, fromMilli(need), fromMilli(row?.milli ?? 0n));
      }
    } else if (!isSystem(l.account)) {
      await tx.$executeRaw`INSERT INTO "Balance" (account, token, milli) VALUES (${l.account}, ${l.token}, ${l.milli})
        ON CONFLICT (account, token) DO UPDATE SET milli = "Balance".milli + EXCLUDED.milli`;
    }
  }
  await tx.ledgerEntry.createMany({
    data: legs.map((l) => ({ txId, account: l.account, token: l.token, milli: l.milli, reason: p.reason, ref: p.ref, epoch: p.epoch })),
  });
  return txId;
}

/** A ledger entry as a composed statement's parts insert it (milli as text: a bigint in JSON). */
type EntryRow = { txId: string; account: string; token: Token; milli: string; reason: string; ref: string | null; epoch: number };

/** The INSERT of ledger entries, in the order given, for a part's CTE (burnManyPart, mintPart). */
function ledgerEntriesSql(entries: readonly EntryRow[]): Sql {
  return sql`INSERT INTO "LedgerEntry" ("txId", account, token, milli, reason, ref, epoch)
    SELECT e."txId", e.account, e.token, e.milli, e.reason, e.ref, e.epoch
    FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(entries)}::jsonb) AS ("txId" text, account text, token text, milli bigint, reason text, ref text, epoch int))
      WITH ORDINALITY AS e("txId", account, token, milli, reason, ref, epoch, n)
    ORDER BY e.n`;
}

/** A posting's non-zero legs in the order they are written: debits first, in a stable order, so concurrent postings lock rows in the same order. */
function orderedLegs(legs: readonly Leg[]): Leg[] {
  return legs.filter((l) => l.milli !== 0n).sort((a, b) => (a.milli < b.milli ? -1 : 1) || a.account.localeCompare(b.account));
}

export interface Move {
  token: Token;
  milli: bigint;
}

/** Moves amounts from one account to another in one posting. */
export function transfer(tx: Tx, from: string, to: string, moves: Move[], meta: { reason: string; ref?: string; epoch: number }) {
  return post(tx, {
    ...meta,
    legs: moves.flatMap((m) => [
      { account: from, token: m.token, milli: -m.milli },
      { account: to, token: m.token, milli: m.milli },
    ]),
  });
}

/** New tokens from the treasury, mirrored as a BandwidthToken mint for the stack. */
export async function mint(tx: Tx, to: string, moves: Move[], meta: { reason: string; ref?: string; epoch: number; stackId: string; from?: string }) {
  const txId = await transfer(tx, meta.from ?? SYSTEM.treasury, to, moves, meta);
  const amounts = moves.filter((m) => m.milli > 0n).map((m) => ({ token: m.token, milli: m.milli.toString() }));
  if (amounts.length) await enqueueChainTx(tx, { kind: 'mint', ref: `ledger:${txId}`, payload: { stackId: meta.stackId, amounts }, epoch: meta.epoch });
  return txId;
}

/**
 * `mint` as part of a composed statement (lib/db/statement.ts), for a flow that writes the account
 * into being in the same statement (a sleeve's spawn): the same posting (its ledger entries in
 * post()'s order, the account's balances raised, no Balance row for the system account) and its
 * Cortex intent, in the caller's one round trip. `name` names its CTEs; its output `name` is the
 * account's balances after it (units per token: balancesFromOutput).
 */
export function mintPart(
  to: string,
  moves: readonly Move[],
  meta: { reason: string; ref?: string; epoch: number; stackId: string },
  name = 'mint',
): StatementPart {
  if (isSystem(to)) throw new Error(`mintPart: ${to} is a system account`);
  const txId = randomUUID();
  const legs = orderedLegs(
    moves.flatMap((m) => [
      { account: SYSTEM.treasury, token: m.token, milli: -m.milli },
      { account: to, token: m.token, milli: m.milli },
    ]),
  );
  for (const l of legs) if (l.account === to && l.milli < 0n) throw new Error('mintPart: a mint moves no tokens out of its account');
  // Per token in the order of `moves` (mint's intent lists its amounts so).
  const credits = new Map<Token, bigint>();
  for (const m of moves) if (m.milli > 0n) credits.set(m.token, (credits.get(m.token) ?? 0n) + m.milli);
  const entries = legs.map(
    (l): EntryRow => ({
      txId,
      account: l.account,
      token: l.token,
      milli: l.milli.toString(),
      reason: meta.reason,
      ref: meta.ref ?? null,
      epoch: meta.epoch,
    }),
  );
  const amounts = [...credits].map(([token, milli]) => ({ token, milli: milli.toString() }));
  const balances = `${name}_balances`;
  return joinParts(
    {
      ctes: [
        {
          name: balances,
          body: sql`INSERT INTO "Balance" (account, token, milli)
            SELECT ${to}, v.token, v.milli FROM jsonb_to_recordset(${JSON.stringify(amounts)}::jsonb) AS v(token text, milli bigint)
            ON CONFLICT (account, token) DO UPDATE SET milli = "Balance".milli + EXCLUDED.milli
            RETURNING token, milli`,
        },
        {
          name: `${name}_entries`,
          body: ledgerEntriesSql(entries),
        },
      ],
      outputs: [{ name, expr: sql`(SELECT json_object_agg(token, milli::text) FROM ${sqlIdent(balances)})` }],
    },
    amounts.length
      ? chainIntentsPart([{ kind: 'mint', ref: `ledger:${txId}`, payload: { stackId: meta.stackId, amounts }, epoch: meta.epoch }], `${name}_intent`)
      : null,
  );
}

/** The balances a mintPart's output holds (units; zero for the tokens it did not mint). */
export function balancesFromOutput(v: unknown): TokenAmounts {
  const out = zeroAmounts();
  for (const [token, milli] of Object.entries((jsonValue(v) as Record<string, string> | null) ?? {})) {
    if ((TOKENS as readonly string[]).includes(token)) out[token as Token] = fromMilli(BigInt(milli));
  }
  return out;
}

/**
 * Tokens consumed by an operation: burned, mirrored as a BandwidthToken burn. (A sleeve spends
 * through sleeves' spendFromSleeve, which also marks its stack active and tells a decommissioned
 * sleeve from a short one.)
 */
export async function burn(tx: Tx, from: string, moves: Move[], meta: { reason: string; ref?: string; epoch: number; stackId: string }) {
  const txId = await transfer(tx, from, SYSTEM.burn, moves, meta);
  const amounts = moves.filter((m) => m.milli > 0n).map((m) => ({ token: m.token, milli: m.milli.toString() }));
  if (amounts.length) await enqueueChainTx(tx, { kind: 'burn', ref: `ledger:${txId}`, payload: { stackId: meta.stackId, amounts }, epoch: meta.epoch });
  return txId;
}

/** One burn of a group (burnManyPart): `moves` from `from`, its own posting. */
export interface BurnInput {
  from: string;
  moves: Move[];
  reason: string;
  ref?: string;
  epoch: number;
  stackId: string;
}

/** A group of burns found an account short when its debits ran (the caller's transaction rolls back). */
export class BalancesShort extends Error {
  constructor(readonly accounts: string[]) {
    super(`balances short: ${accounts.join(', ')}`);
  }
}

/**
 * Many burns (a group commit's) as part of the write's one statement (lib/db/statement.ts): each is
 * its own balanced posting (its own txId and ledger entries, in order), as `burn` writes it; the
 * debits of each (non-system) account are summed into one conditional UPDATE. Their BandwidthToken
 * intent is one row for the group (an epoch's): the Cortex mirror settles the ledger by its net per
 * stack and token anyway, so each stack's burns are summed here, a `burn` row when the group spans
 * one stack and a `burns` row (split per stack by the submitter) when it spans several. A row a
 * write was a tenth of PostgreSQL's work a write, and its settlement as much again. When any account
 * holds less than its burns need, the statement is undone with BalancesShort: the caller checked the
 * balances it read, so this means a concurrent spend came first, and it retries.
 */
export function burnManyPart(burns: readonly BurnInput[]): StatementPart | null {
  const need = new Map<string, bigint>();
  const entries: EntryRow[] = [];
  // Per epoch (a group commit has one), per stack in the order it first burns: milli per token.
  const groups = new Map<number, { txIds: string[]; stacks: Map<string, Map<Token, bigint>> }>();
  for (const b of burns) {
    if (isSystem(b.from)) throw new Error(`burnManyPart: ${b.from} is a system account`);
    const txId = randomUUID();
    for (const m of b.moves) {
      if (m.milli <= 0n) continue;
      const k = `${b.from}\u001f${m.token}`;
      need.set(k, (need.get(k) ?? 0n) + m.milli);
      // The legs as post() orders them: the debit first, then the burn account's credit.
      entries.push({ txId, account: b.from, token: m.token, milli: (-m.milli).toString(), reason: b.reason, ref: b.ref ?? null, epoch: b.epoch });
      entries.push({ txId, account: SYSTEM.burn, token: m.token, milli: m.milli.toString(), reason: b.reason, ref: b.ref ?? null, epoch: b.epoch });
    }
    if (!b.moves.some((m) => m.milli > 0n)) continue;
    let g = groups.get(b.epoch);
    if (!g) groups.set(b.epoch, (g = { txIds: [], stacks: new Map() }));
    g.txIds.push(txId);
    let sums = g.stacks.get(b.stackId);
    if (!sums) g.stacks.set(b.stackId, (sums = new Map()));
    for (const m of b.moves) if (m.milli > 0n) sums.set(m.token, (sums.get(m.token) ?? 0n) + m.milli);
  }
  const intents = [...groups].map(([epoch, g]) => {
    const per = [...g.stacks].map(([stackId, sums]) => ({ stackId, amounts: [...sums].map(([token, milli]) => ({ token, milli: milli.toString() })) }));
    // The first posting's txId, and how many more the row carries.
    const ref = `ledger:${g.txIds[0]}${g.txIds.length > 1 ? `+${g.txIds.length - 1}` : ''}`;
    return per.length === 1 ? { kind: 'burn' as const, ref, payload: per[0]!, epoch } : { kind: 'burns' as const, ref, payload: { stacks: per }, epoch };
  });
  if (!need.size) return null;
  const keys = [...need.keys()].sort();
  const debits = keys.map((k) => {
    const [account, token] = k.split('\u001f') as [string, string];
    return { account, token, need: need.get(k)!.toString() };
  });
  const accounts = [...new Set(debits.map((d) => d.account))];
  return joinParts(
    {
      ctes: [
        {
          name: 'ledger_debit',
          // The accounts and tokens as arrays besides the join, so that the prepared statement's
          // generic plan reads the balances by their key rather than scanning the table (as
          // sleeveWritesPart: 51 pages, 0.7 ms of a 10-write statement after 2 minutes without
          // autovacuum; 0.15 ms by the key).
          body: sql`UPDATE "Balance" b SET milli = b.milli - v.need
            FROM jsonb_to_recordset(${JSON.stringify(debits)}::jsonb) AS v(account text, token text, need bigint)
            WHERE b.account = v.account AND b.token = v.token AND b.milli >= v.need
              AND b.account = ANY(${accounts}::text[]) AND b.token = ANY(${[...new Set(debits.map((d) => d.token))]}::text[])
            RETURNING 1`,
        },
        {
          name: 'ledger_entries',
          body: ledgerEntriesSql(entries),
        },
      ],
      checks: [
        {
          holds: sql`(SELECT count(*) FROM ledger_debit) = ${keys.length}::int`,
          fail: () => new BalancesShort(accounts),
        },
      ],
    },
    chainIntentsPart(intents, 'ledger_intents'),
  );
}

/** A (non-system) account's balance of a token in milli-units, as an SQL expression (0 without a row); `account` is an SQL expression. */
export const balanceMilliSql = (account: Sql, token: Token): Sql =>
  sql`COALESCE((SELECT b.milli FROM "Balance" b WHERE b.account = ${account} AND b.token = ${token}), 0)`;

/** sleeveAccount as an SQL expression over a sleeve id expression. */
export const sleeveAccountSql = (sleeveId: Sql): Sql => sql`('sleeve:' || ${sleeveId})`;

/** A system account's balance (units): the sum of its ledger entries. */
export async function systemBalance(db: Db | Tx, account: (typeof SYSTEM)[keyof typeof SYSTEM]): Promise<TokenAmounts> {
  const rows = await db.$queryRaw<Array<{ token: string; milli: bigint }>>`
    SELECT token, SUM(milli)::bigint AS milli FROM "LedgerEntry" WHERE account = ${account} GROUP BY token`;
  const out = zeroAmounts();
  for (const r of rows) if ((TOKENS as readonly string[]).includes(r.token)) out[r.token as Token] = fromMilli(r.milli);
  return out;
}

/**
 * Balances in milli-units of several (non-system) accounts (every token, zero when absent), as one
 * read of a read statement. `accounts`: the account names, or an SQL query of one column of them (an
 * account missing from the map then holds nothing).
 */
export function balancesMilliRead(accounts: readonly string[] | Sql): ReadPart<Map<string, Record<Token, bigint>>> {
  const zero = () => Object.fromEntries(TOKENS.map((t) => [t, 0n])) as Record<Token, bigint>;
  const listed = Array.isArray(accounts) ? (accounts as readonly string[]) : undefined;
  return {
    expr: listed
      ? sql`SELECT json_agg(json_build_object('a', account, 't', token, 'm', milli::text)) FROM "Balance" WHERE account = ANY(${[...listed]}::text[])`
      : sql`SELECT json_agg(json_build_object('a', account, 't', token, 'm', milli::text)) FROM "Balance" WHERE account = ANY(ARRAY(${accounts as Sql}))`,
    parse: (v) => {
      const out = new Map<string, Record<Token, bigint>>((listed ?? []).map((a) => [a, zero()]));
      for (const r of (jsonValue(v) as Array<{ a: string; t: string; m: string }> | null) ?? []) {
        let a = out.get(r.a);
        if (!a && !listed) out.set(r.a, (a = zero()));
        if (a && (TOKENS as readonly string[]).includes(r.t)) a[r.t as Token] = BigInt(r.m);
      }
      return out;
    },
  };
}

/**
 * Token totals (units) per holder, over the accounts an SQL relation `holders` lists (columns
 * `holder` and `account`, written by the context that knows who holds what), as one read of a read
 * statement: the balances summed in the database, exact to the milli-unit as addAmounts sums them.
 * A holder with no balance is absent from the map.
 */
export function holderTotalsRead(holders: Sql): ReadPart<Map<string, TokenAmounts>> {
  return {
    expr: sql`SELECT json_agg(json_build_array(t.holder, t.token, t.milli::text)) FROM (
      SELECT h.holder, b.token, SUM(b.milli) AS milli FROM (${holders}) h JOIN "Balance" b ON b.account = h.account GROUP BY h.holder, b.token
    ) t`,
    parse: (v) => {
      const out = new Map<string, TokenAmounts>();
      for (const [holder, token, milli] of (jsonValue(v) as Array<[string, string, string]> | null) ?? []) {
        if (!(TOKENS as readonly string[]).includes(token)) continue;
        let a = out.get(holder);
        if (!a) out.set(holder, (a = zeroAmounts()));
        a[token as Token] = fromMilli(BigInt(milli));
      }
      return out;
    },
  };
}

/** Balances (units) of several (non-system) accounts in one query. */
export async function balancesOf(db: Db | Tx, accounts: string[]): Promise<Map<string, TokenAmounts>> {
  const out = new Map<string, TokenAmounts>(accounts.map((a) => [a, zeroAmounts()]));
  if (!accounts.length) return out;
  const rows = await db.balance.findMany({ where: { account: { in: accounts } } });
  for (const r of rows) {
    const a = out.get(r.account)!;
    if ((TOKENS as readonly string[]).includes(r.token)) a[r.token as Token] = fromMilli(r.milli);
  }
  return out;
}

export async function balanceOf(db: Db | Tx, account: string): Promise<TokenAmounts> {
  return (await balancesOf(db, [account])).get(account)!;
}

/**
 * `sweep` as part of a composed statement (lib/db/statement.ts): every positive balance of `from`
 * moved to `to` in one posting (txId, reason, ref, epoch as transfer writes them; a debit and a
 * credit a token), reading the balances under their row locks, so a spend that commits meanwhile is
 * counted before the sweep and nothing is left. `sweptUnitsSql(name)` is what it moved (units, a
 * jsonb object of every token, 0 for those it did not), for a CTE of the same statement.
 */
export function sweepPart(from: string, to: string, meta: { reason: string; ref?: string; epoch: number }, name = 'sweep'): StatementPart {
  if (isSystem(from) || isSystem(to)) throw new Error(`sweepPart: ${from} and ${to} must not be system accounts`);
  const held = `${name}_held`;
  const moved = `${name}_from`;
  const txId = randomUUID();
  return {
    ctes: [
      {
        name: held,
        body: sql`SELECT token, milli FROM "Balance" WHERE account = ${from} AND token = ANY(${[...TOKENS]}::text[]) ORDER BY token FOR UPDATE`,
      },
      {
        name: moved,
        body: sql`UPDATE "Balance" b SET milli = b.milli - h.milli FROM ${sqlIdent(held)} h
          WHERE b.account = ${from} AND b.token = h.token AND h.milli > 0 RETURNING b.token, h.milli`,
      },
      {
        name: `${name}_to`,
        body: sql`INSERT INTO "Balance" (account, token, milli) SELECT ${to}, m.token, m.milli FROM ${sqlIdent(moved)} m
          ON CONFLICT (account, token) DO UPDATE SET milli = "Balance".milli + EXCLUDED.milli`,
      },
      {
        // The debits first, then the credits (as post() orders a transfer's legs), a token's in token order.
        name: `${name}_entries`,
        body: sql`INSERT INTO "LedgerEntry" ("txId", account, token, milli, reason, ref, epoch)
          SELECT ${txId}, e.account, e.token, e.milli, ${meta.reason}, ${meta.ref ?? null}::text, ${meta.epoch}::int
          FROM (SELECT 0 AS leg, ${from}::text AS account, token, -milli AS milli FROM ${sqlIdent(moved)}
                UNION ALL SELECT 1, ${to}::text, token, milli FROM ${sqlIdent(moved)}) e
          ORDER BY e.leg, e.token`,
      },
    ],
  };
}

/** What a sweepPart named `name` moved, in units, as a jsonb object of every token (0 for those it did not move). */
export function sweptUnitsSql(name = 'sweep'): Sql {
  const moved = sqlIdent(`${name}_from`);
  return sql`(SELECT jsonb_object_agg(t.token, COALESCE(m.milli, 0)::float8 / 1000) FROM unnest(${[...TOKENS]}::text[]) AS t(token) LEFT JOIN ${moved} m ON m.token = t.token)`;
}
