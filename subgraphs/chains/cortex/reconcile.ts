// Drift between the database and Cortex: confirmed intents whose effect is not on the chain, token
// supplies and stacks' balances that do not mirror the confirmed mints and burns, rows stuck or
// failed. Reported, not repaired.
// The check is incremental: a checker folds the rows confirmed in blocks it has not seen yet into
// running sums (the stacks' expected balances, the tokens' supplies) and checks each record once,
// as it lands, so a check costs what landed since the last one and not the outbox's whole history
// (reading every confirmed row every minute cost seconds of the process's event loop once the
// outbox held a few hundred thousand rows). Everything is read at one block, the newest whose rows
// are all recorded: the chain as those rows left it.
import { Contract } from 'ethers';
import { sql, type Db, type Sql } from '../../../lib/db/index.ts';
import type { Platform } from '../../../lib/platform.ts';
import { artifact, CHAIN_TOKENS, type ChainToken } from './artifacts.ts';
import { amountsToChain, ownerAddress, recordKey } from './calls.ts';
import { tokenIdResolver, type CortexChain } from './submitter.ts';

export interface Drift {
  kind: 'identity' | 'sleeve' | 'residue' | 'anchor' | 'balance' | 'supply' | 'settlement' | 'stuck' | 'failed';
  ref: string;
  detail: string;
}

export interface ReconcileOptions {
  /** Rows pending or submitted for longer than this count as stuck. */
  stuckAfterMs?: number;
  /**
   * Blocks behind the newest recorded one that a check stops at: the receipts of the newest blocks
   * may still be being recorded (a running checker folds each block once, so it must not fold one
   * before all of its rows are in). 0 for a one-off check.
   */
  lagBlocks?: number;
}

/** reconcile over the running Cortex service of this process (p.local 'cortex'); logs a warning on drift. */
export async function reconcile(p: Platform, opts: ReconcileOptions = {}): Promise<Drift[]> {
  const cortex = p.local.get('cortex') as { chain: CortexChain } | undefined;
  if (!cortex) throw new Error('cortex service is not running in this process');
  const drift = await reconcileChain(p.db.prisma, cortex.chain, opts);
  if (drift.length) p.log.warn({ drift: drift.slice(0, 20), count: drift.length }, 'cortex: database and chain disagree');
  return drift;
}

/** One check of everything the outbox recorded (a fresh checker's first check). */
export async function reconcileChain(db: Db, chain: CortexChain, opts: ReconcileOptions = {}): Promise<Drift[]> {
  return driftChecker(db, chain).check(opts);
}

/** Confirmed rows read a page at a time. */
const PAGE = 2_000;
/** Records (identities, sleeves, residues, anchors, settlements) checked on chain at most per check: the newest. */
const MAX_RECORD_CHECKS = 2_000;

/** Settlements whose ledger rows one statement sums (a minute's under load is about sixty). */
const SETTLEMENTS_A_READ = 500;

/**
 * A settlement's ledger rows summed: per kind, stack (or token id) and token, the sum of the
 * amounts of the rows in the form the ledger writes them ({stackId or tokenId, amounts: [{token,
 * milli}]}, milli a non-negative integer, token one of CHAIN_TOKENS); each other row as it is
 * (payload set), for amountsToChain to read (and refuse) as before.
 */
type LedgerGroup = { kind: string; tokenId: string | null; stackId: string | null; token: string | null; milli: string | null; payload: unknown };

function ledgerSums(settlements: readonly bigint[]): Sql {
  // A JSON number of at most 15 digits is exact where the general way reads it (a double). A row
  // without amounts makes the test NULL: coalesced to not plain, or it would be in neither part.
  return sql`WITH l AS (
      SELECT kind, payload,
        CASE WHEN jsonb_typeof(payload->'tokenId') = 'number' THEN payload->>'tokenId' END AS "tokenId",
        CASE WHEN jsonb_typeof(payload->'stackId') = 'string' THEN payload->>'stackId' END AS "stackId"
      FROM "ChainLedgerIntent" WHERE "settlementId" = ANY(${settlements.map(String)}::text[]::bigint[])
    ), s AS (
      SELECT l.*, coalesce(
        jsonb_typeof(payload->'amounts') = 'array'
        AND CASE WHEN "tokenId" IS NOT NULL THEN "tokenId" ~ '^[0-9]{1,15}$' ELSE "stackId" IS NOT NULL END
        AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(payload->'amounts') e
          WHERE NOT (jsonb_typeof(e) = 'object' AND jsonb_typeof(e->'token') = 'string' AND (e->>'token') = ANY(${[...CHAIN_TOKENS]}::text[])
            AND CASE jsonb_typeof(e->'milli') WHEN 'string' THEN (e->>'milli') ~ '^[0-9]{1,30}$' WHEN 'number' THEN (e->>'milli') ~ '^[0-9]{1,15}$' ELSE false END)),
        false) AS plain FROM l
    )
    SELECT kind, "tokenId", CASE WHEN "tokenId" IS NULL THEN "stackId" END AS "stackId", e->>'token' AS token,
      sum((e->>'milli')::numeric)::text AS milli, NULL::jsonb AS payload
    FROM s CROSS JOIN jsonb_array_elements(payload->'amounts') e WHERE plain
    GROUP BY 1, 2, 3, 4
    UNION ALL
    SELECT kind, NULL, NULL, NULL, NULL, payload FROM s WHERE NOT plain`;
}

/** A checker per chain and suite: a node that lost blocks, or a new suite, needs a new one. */
export interface DriftChecker {
  /** Folds what was confirmed since the last check and reports the drift it finds. */
  check(opts?: ReconcileOptions): Promise<Drift[]>;
}

type Confirmed = { id: bigint; kind: string; payload: unknown; blockNumber: number };

export function driftChecker(db: Db, chain: CortexChain): DriftChecker {
  const c = (name: Parameters<typeof artifact>[0], addr: string) => new Contract(addr, artifact(name).abi, chain.provider);
  const { contracts } = chain.suite;
  const identity = c('StackIdentity', contracts.StackIdentity);
  const sleeves = c('SleeveRegistry', contracts.SleeveRegistry);
  const residues = c('ResidueRegistry', contracts.ResidueRegistry);
  const anchors = c('EpochAnchor', contracts.EpochAnchor);
  const bandwidth = c('BandwidthToken', contracts.BandwidthToken);
  const tokenIdOf = tokenIdResolver(db);

  // Folded so far: every confirmed row of the blocks up to `doneBlock`.
  let doneBlock = -1;
  const expectedBalance = new Map<string, bigint>(); // `${tokenId}:${token}`
  let supply = CHAIN_TOKENS.map(() => 0n);

  async function check(opts: ReconcileOptions = {}): Promise<Drift[]> {
    const drift: Drift[] = [];
    const head = await chain.provider.getBlockNumber();
    const [{ m }] = await db.$queryRaw<{ m: number | null }[]>`SELECT max("blockNumber") AS m FROM "ChainOutbox" WHERE status = 'confirmed'`;
    // A database that claims blocks the chain does not have is read at the chain's head.
    const to = Math.min(m ?? -1, head) - (opts.lagBlocks ?? 0);
    const at = { blockTag: Math.max(to, 0) };
    const records: (() => Promise<void>)[] = [];
    const sleeveFinal = new Map<string, boolean>();
    // What this window adds to the running sums, merged into them once the check has run through
    // (a check that fails half way folds nothing, and the next one reads the same blocks again).
    const delta = new Map<string, bigint>();
    const sums = [...supply];
    const add = (tokenId: number | bigint, token: number, v: bigint) => {
      const key = `${tokenId}:${token}`;
      delta.set(key, (delta.get(key) ?? 0n) + v);
      sums[token] += v;
    };
    const claims: Promise<void>[] = [];
    const ledger: Pick<Confirmed, 'kind' | 'payload'>[] = [];
    const settlements: bigint[] = [];
    // The window's rows in block order, a page at a time (keyset on block and id, starting past every
    // id of doneBlock, which is folded already); rows confirmed without a block (ledger rows that
    // netted to nothing) have no chain effect.
    for (let after = { b: doneBlock, id: 2n ** 63n - 1n }; to > doneBlock; ) {
      const page = await db.$queryRaw<Confirmed[]>`
        SELECT id, kind, payload, "blockNumber" FROM "ChainOutbox"
        WHERE status = 'confirmed' AND "blockNumber" <= ${to}
          AND ("blockNumber" > ${after.b} OR ("blockNumber" = ${after.b} AND id > ${after.id}))
        ORDER BY "blockNumber", id LIMIT ${PAGE}`;
      for (const row of page) fold(row);
      if (page.length < PAGE) break;
      const last = page[page.length - 1]!;
      after = { b: last.blockNumber, id: BigInt(last.id) };
      await new Promise((r) => setImmediate(r)); // a long history: the event loop gets its turn
    }

    function fold(row: Confirmed) {
      const p = row.payload as Record<string, unknown>;
      switch (row.kind) {
        case 'mintIdentity':
          records.push(async () => {
            const want = ownerAddress(p.owner, chain.suite.operator);
            const owner = (await identity.ownerOf(p.tokenId, at).catch(() => undefined)) as string | undefined;
            if (owner !== want)
              drift.push({ kind: 'identity', ref: String(p.stackId), detail: `ownerOf(${p.tokenId}) is ${owner ?? 'nobody'}, expected ${want}` });
          });
          break;
        case 'spawnSleeve':
          sleeveFinal.set(String(p.sleeveId), true);
          break;
        case 'decommissionSleeve':
          sleeveFinal.set(String(p.sleeveId), false);
          break;
        case 'claimResidue':
          // The bounty is on the chain's record of the residue: every claim is read (it is a balance).
          claims.push(
            (async () => {
              const r = (await residues.residueOf(recordKey(String(p.residueId)), at)) as { status: bigint; bountyMilli: bigint; claimantTokenId: bigint };
              if (Number(r.status) !== 2) drift.push({ kind: 'residue', ref: String(p.residueId), detail: 'claimed in the database, not on Cortex' });
              add(r.claimantTokenId, 4, r.bountyMilli);
            })(),
          );
          break;
        case 'anchor':
          records.push(async () => {
            const ok = (await anchors.verify(p.epoch, `0x${String(p.crossRoot).replace(/^0x/, '')}`, at)) as boolean;
            if (!ok) drift.push({ kind: 'anchor', ref: `epoch:${p.epoch}`, detail: 'anchor not verifiable on Cortex' });
          });
          break;
        case 'settle':
          settlements.push(BigInt(row.id));
          records.push(async () => {
            if (!((await bandwidth.settled(row.id, at)) as boolean))
              drift.push({ kind: 'settlement', ref: `settlement:${row.id}`, detail: 'confirmed in the database, not on Cortex' });
          });
          break;
        // Sent alone: ledger rows from before settlements.
        case 'mint':
        case 'burn':
          ledger.push(row);
          break;
      }
    }
    await Promise.all(claims);
    // The ledger rows of the settlements confirmed in the window, summed by the database per stack,
    // kind and token: a minute's settlements under the perceive load carry about a hundred thousand
    // rows, and reading them into this process and folding them one by one held its event loop for
    // 160-320 ms every minute (all 32 clients of the bench waited out the stall). Still the ledger's
    // own rows (not the settlements' nets): the sums are theirs. A row not in the form the ledger
    // writes is read as it is and folded the general way below (amountsToChain: an unknown token or
    // a bad amount fails the check, as it did).
    for (let i = 0; i < settlements.length; i += SETTLEMENTS_A_READ) {
      const groups = await db.$queryRaw<LedgerGroup[]>(ledgerSums(settlements.slice(i, i + SETTLEMENTS_A_READ)));
      for (const g of groups) {
        if (g.payload !== null) {
          ledger.push({ kind: g.kind, payload: g.payload });
          continue;
        }
        const t = g.tokenId !== null ? Number(g.tokenId) : await tokenIdOf(g.stackId!);
        const v = BigInt(g.milli!);
        // No token: the rows could never have been settled (they fail as invalid), so they are no balance.
        if (t !== undefined && v > 0n) add(t, CHAIN_TOKENS.indexOf(g.token as ChainToken), g.kind === 'mint' ? v : -v);
      }
    }
    // Rows sent alone, and rows not in the ledger's form.
    for (const row of ledger) {
      const p = row.payload as Record<string, unknown>;
      const t = typeof p.tokenId === 'number' ? p.tokenId : await tokenIdOf(String(p.stackId));
      const { kinds, values } = amountsToChain(p.amounts);
      // No token: the row could never have been settled (it fails as invalid), so it is no balance.
      if (t !== undefined) kinds.forEach((k, i) => add(t, k, row.kind === 'mint' ? values[i] : -values[i]));
    }
    for (const [sleeveId, alive] of sleeveFinal)
      records.push(async () => {
        const onChain = (await sleeves.isAlive(recordKey(sleeveId), at)) as boolean;
        if (onChain !== alive) drift.push({ kind: 'sleeve', ref: sleeveId, detail: `alive on Cortex is ${onChain}, expected ${alive}` });
      });
    // The newest records, each checked once (a catch-up over a long history checks the last ones).
    await Promise.all(records.slice(-MAX_RECORD_CHECKS).map((f) => f()));
    // The balances this window changed, and every token's supply: all at the same block.
    await Promise.all(
      [...delta].map(async ([key, d]) => {
        const [tokenId, token] = key.split(':').map(Number);
        const want = (expectedBalance.get(key) ?? 0n) + d;
        const have = (await bandwidth.balanceOf(tokenId, token, at)) as bigint;
        if (have !== want) drift.push({ kind: 'balance', ref: `token:${tokenId}:${CHAIN_TOKENS[token]}`, detail: `Cortex ${have}, database ${want} (milli)` });
      }),
    );
    await Promise.all(
      CHAIN_TOKENS.map(async (t, i) => {
        const erc20 = c('CortexToken', chain.suite.tokens[t]);
        const have = (await erc20.totalSupply(at)) as bigint;
        if (have !== sums[i]) drift.push({ kind: 'supply', ref: t, detail: `totalSupply ${have}, confirmed mints minus burns ${sums[i]} (milli)` });
      }),
    );
    // Folded: the next check starts after this block.
    if (to > doneBlock) {
      for (const [key, d] of delta) expectedBalance.set(key, (expectedBalance.get(key) ?? 0n) + d);
      supply = sums;
      doneBlock = to;
    }
    const stuckBefore = new Date(Date.now() - (opts.stuckAfterMs ?? 60_000));
    // On the status index, unordered: Prisma orders a limited read by id, and the planner then walked
    // the primary key through every confirmed row looking for a hundred open ones.
    // The ledger rows not settled yet likewise, on their partial indexes (a settled one is as stuck
    // or failed as its settle row, which is reported).
    const open = await db.$queryRaw<{ ref: string; kind: string; status: string; createdAt: Date }[]>`
      (SELECT ref, kind, status, "createdAt" FROM "ChainOutbox" WHERE status IN ('pending', 'submitted') AND "createdAt" < ${stuckBefore} LIMIT 100)
      UNION ALL
      (SELECT ref, kind, status, "createdAt" FROM "ChainLedgerIntent" WHERE status = 'pending' AND "createdAt" < ${stuckBefore} LIMIT 100)`;
    for (const r of open.slice(0, 100)) drift.push({ kind: 'stuck', ref: r.ref, detail: `${r.kind} ${r.status} since ${r.createdAt.toISOString()}` });
    const failed = await db.$queryRaw<{ ref: string; kind: string; lastError: string | null }[]>`
      (SELECT ref, kind, "lastError" FROM "ChainOutbox" WHERE status = 'failed' ORDER BY id DESC LIMIT 100)
      UNION ALL
      (SELECT ref, kind, "lastError" FROM "ChainLedgerIntent" WHERE status = 'failed' ORDER BY id DESC LIMIT 100)`;
    for (const r of failed.slice(0, 100)) drift.push({ kind: 'failed', ref: r.ref, detail: `${r.kind}: ${r.lastError ?? 'failed'}` });
    return drift;
  }

  return { check };
}

export { cortexTxSource } from './tx-source.ts';
