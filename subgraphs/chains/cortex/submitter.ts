// The one nonce-managed sender for Cortex. It reads pending ChainOutbox rows in id order, maps
// each to its contract call, signs it with the next nonce, stores nonce + hash + the signed bytes
// (status 'submitted') before broadcasting, and sends many per block without waiting. A confirmer
// marks rows confirmed (or failed on a revert) from receipts and writes the chain side back onto
// the mirrored record. Because the signed bytes are stored first, a re-send after a crash or a
// dropped transaction is the same transaction: a row can never land twice.
// Ledger rows (mint, burn: ChainLedgerIntent) are not sent one by one: each round first folds the
// pending ones whose epoch has ended into settle rows (settlement.ts), which are then sent like any
// other intent; a ledger row's outcome is its settle row's.
// Stacks' heads are not intents of their writes: once an epoch the heads the chain lacks are queued
// as updateStacks rows, many stacks a call (heads.ts).
import { Transaction, type Wallet, keccak256, type JsonRpcProvider } from 'ethers';
import { sql, type Database, type Db, type Sql } from '../../../lib/db/index.ts';
import { jsonValue, queryPrepared } from '../../../lib/db/statement.ts';
import type { Logger } from '../../../lib/log.ts';
import { buildCall, canonicalJson, IntentError, type ChainCall } from './calls.ts';
import { timeSlicer } from '../../../lib/time-slice.ts';
import { iface, SUITE } from './artifacts.ts';
import type { Deployment } from './deploy.ts';
import { markRecordPending, trySettleRecords, type RecordOutcome } from './records.ts';
import { planSettlements, withoutStack, type LedgerRow, type SettlementPayload, type SettlementPlan } from './settlement.ts';
import { appliedHeads, headsMirrored, queueHeads } from './heads.ts';
import { signEip1559 } from './sign.ts';
import { singleFlight } from '../../../lib/single-flight.ts';

export interface CortexChain {
  provider: JsonRpcProvider;
  wallet: Wallet;
  /** The operator's address, when it is known without the wallet (whose keys are built on first use). */
  address?: string;
  suite: Deployment;
  chainId: number;
}

export interface SubmitterOptions {
  /** Poll for new intents (ms). */
  pollMs?: number;
  /**
   * The longest poll after a run of idle rounds (nothing pending, nothing sent and unconfirmed, no
   * ledger row to settle): each idle round doubles the wait, from pollMs up to this; a round with
   * work brings it back. Default 5 x pollMs (the Cortex service gives a quarter epoch, at most 1 s).
   */
  idlePollMaxMs?: number;
  /** The first round waits for this (the process's start: lib/service.ts started); later ones follow the poll timer and kicks. */
  firstRound?: Promise<unknown>;
  /** Rows signed and sent per round. */
  batchSize?: number;
  /** Submitted-but-unconfirmed rows allowed at once. */
  maxInFlight?: number;
  /** A submitted transaction the node no longer knows, older than this, is re-broadcast. */
  droppedAfterMs?: number;
  /**
   * The current epoch: ledger rows are settled once their epoch has ended (epoch < this). Without it
   * every pending ledger row is settled at each round (tests, benches driving the submitter alone).
   */
  currentEpoch?: () => number;
  /**
   * Once a pending ledger row is older than this, every pending row is settled, its epoch ended or
   * not (an epoch that runs long: a late block, or Medulla stalled). Default 10 s; the Cortex
   * service sets one and a half epoch intervals.
   */
  settleAfterMs?: number;
  /** Test seam: runs after a round is stored and before it is broadcast (a throw = a crash there). */
  afterPersist?: (rows: { id: bigint; nonce: number; txHash: string }[]) => void | Promise<void>;
}

export interface Submitter {
  /** Runs one round now (confirm, then submit). */
  tick(): Promise<void>;
  kick(): void;
  /** The wait before the next polled round (ms): pollMs, or longer after idle rounds (up to idlePollMaxMs). */
  pollWaitMs(): number;
  /**
   * Holds rounds until resume() (the node is being replaced: a round against a chain that lost
   * blocks would settle ledger rows against rewound balances). Resolves once the round in flight
   * has ended.
   */
  pause(): Promise<void>;
  resume(): void;
  /** Resolves once no row is pending or submitted (or rejects after timeoutMs). */
  idle(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const strip0x = (h: string) => (h.startsWith('0x') ? h.slice(2) : h).toLowerCase();
const SHAPE_A_STACK = /^stack:[a-z]+:(\d+):[0-9a-f]{12}$/;

/** Makes an identity-token resolver over the outbox's own mintIdentity intents. */
export function tokenIdResolver(db: Db) {
  const known = new Map<string, number>();
  return async (stackId: string): Promise<number | undefined> => {
    const hit = known.get(stackId);
    if (hit !== undefined) return hit;
    // On the ref index: a record's intents carry its id as their ref (enqueueChainTx holds them to it).
    const row = await db.chainOutbox.findFirst({
      where: { kind: 'mintIdentity', ref: stackId, payload: { path: ['stackId'], equals: stackId } },
      orderBy: { id: 'asc' },
    });
    let t = (row?.payload as { tokenId?: unknown } | undefined)?.tokenId;
    if (typeof t !== 'number') {
      const m = SHAPE_A_STACK.exec(stackId);
      t = m ? Number(m[1]) : undefined;
    }
    if (typeof t === 'number') known.set(stackId, t);
    return t as number | undefined;
  };
}

/** Best-effort name of a revert (custom error with args, or the node's message); never secrets. */
export function revertReason(e: unknown): string {
  const err = e as { data?: string; info?: { error?: { data?: string; message?: string } }; shortMessage?: string; message?: string };
  const data = typeof err.data === 'string' ? err.data : err.info?.error?.data;
  if (typeof data === 'string' && data.length >= 10) {
    for (const n of [...SUITE, 'CortexToken'] as const) {
      try {
        const parsed = iface(n).parseError(data);
        if (parsed) return `${parsed.name}(${parsed.args.map(String).join(', ')})`;
      } catch {
        /* not this contract's error */
      }
    }
  }
  return String(err.shortMessage ?? err.info?.error?.message ?? err.message ?? e).slice(0, 300);
}

type Row = Awaited<ReturnType<Db['chainOutbox']['findMany']>>[number];

/** What the confirmer reads of a receipt: its status and block, and its logs' addresses and topics. */
export interface Receipt {
  status: number | null;
  blockNumber: number;
  logs: ReadonlyArray<{ address: string; topics: readonly string[] }>;
}

/**
 * A transaction's receipt (null while not mined), read raw: a settlement's receipt has a log per
 * entry, and ethers' getTransactionReceipt builds a Log object of each (with its data and
 * provider) that nothing here reads.
 */
export async function receiptOf(provider: JsonRpcProvider, txHash: string): Promise<Receipt | null> {
  const r = (await provider.send('eth_getTransactionReceipt', [`0x${strip0x(txHash)}`])) as {
    status?: string | null;
    blockNumber: string;
    logs?: Array<{ address: string; topics: string[] }>;
  } | null;
  if (!r) return null;
  return {
    status: r.status == null ? null : Number(r.status),
    blockNumber: Number(r.blockNumber),
    logs: (r.logs ?? []).map((l) => ({ address: l.address, topics: l.topics })),
  };
}

export function startSubmitter(database: Database, chain: CortexChain, log: Logger, opts: SubmitterOptions = {}): Submitter {
  const db = database.prisma;
  // The reads every round makes (five a second, and the epoch's pending ledger rows, thousands at a
  // time under load) go through the driver as prepared statements: through Prisma's engine each cost
  // 0.25-0.45 ms of the platform's thread beyond the query, and the ledger rows' read 12 ms instead
  // of 7 for 3,000 rows. The writes stay with Prisma (a transaction owns the rows it signs).
  const read = <R>(q: Sql) => queryPrepared<R>(database, q);
  /** Outbox rows as the driver returns them, typed as Prisma's (bigint ids, parsed JSON payloads). */
  const outboxRows = async (q: Sql): Promise<Row[]> =>
    (await read<Omit<Row, 'id' | 'payload'> & { id: string | bigint; payload: unknown }>(q)).map((r) => ({
      ...r,
      id: BigInt(r.id),
      payload: jsonValue(r.payload) as Row['payload'],
    }));
  const count = async (q: Sql) => Number((await read<{ n: number | string }>(q))[0]?.n ?? 0);
  const pollMs = opts.pollMs ?? 200;
  const idlePollMaxMs = Math.max(pollMs, opts.idlePollMaxMs ?? pollMs * 5);
  /** Whether the rounds since the last poll found work; idle rounds in a row back the poll off. */
  let roundsBusy = false;
  let idleRounds = 0;
  let pollWait = pollMs;
  /** Whether the last read of the sent rows found some unconfirmed (a round waiting for their block is not idle). */
  let sentUnconfirmed = false;
  const batchSize = opts.batchSize ?? 100;
  const maxInFlight = opts.maxInFlight ?? 1000;
  const droppedAfterMs = opts.droppedAfterMs ?? 12_000;
  const settleAfterMs = opts.settleAfterMs ?? 10_000;
  // How long a stack's ledger rows may wait for in-flight transactions before they fail: past the
  // drop timeout (rows written while the chain was down are already that old when it returns).
  const maxWaitMs = droppedAfterMs * 10;
  const { provider } = chain;
  const from = chain.address ?? chain.wallet.address;
  /** The operator's key, for the transactions signed here (sign.ts); the wallet builds its keys on first use. */
  const privateKey = () => chain.wallet.privateKey;
  const tokenIdOf = tokenIdResolver(db);
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let firstPass = true;
  let scannedTo: number | undefined;
  let lastDropCheck = 0;
  let lastFullConfirm = 0;
  const dropCheckEveryMs = Math.min(droppedAfterMs / 2, 2000);

  // Where a round's time went, by step (ms), for the slow-round warning: a round over 2 s holds the
  // ended epoch's ledger rows pending, and its three phases alone did not say which part was slow.
  let steps: Record<string, number> = {};
  const timed = async <T>(step: string, f: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    try {
      return await f();
    } finally {
      steps[step] = Math.round((steps[step] ?? 0) + performance.now() - t);
    }
  };

  /** `applied`: of an updateStacks row, the tokens whose heads the chain took (its receipt's events). */
  type Outcome = { row: Row; outcome: 'confirmed' | 'failed'; data: { blockNumber?: number; lastError?: string | null }; applied?: Set<number> };
  /** Record writes a busy row put off: (outbox row id) -> what to write, tried again each round. */
  let recordsBusy: RecordOutcome[] = [];
  const retryRecords = async () => {
    const put = recordsBusy.splice(0);
    recordsBusy = await timed('records', () => trySettleRecords(db, put));
  };
  /** Settles many rows in one statement; then the mirrored records' chainStatus. */
  const settleAll = async (items: Outcome[]) => {
    if (!items.length) return;
    // One statement, whatever the count: the rows' outcomes (a field the outcome leaves out keeps its
    // value). Row by row it outlasted Prisma's transaction timeout under load (hundreds of rows a
    // block). A settlement's ledger rows are not written: their outcome is the settle row's.
    const rows = items.map(({ row, outcome, data }) => ({
      id: row.id.toString(),
      s: outcome,
      b: data.blockNumber ?? null,
      hb: data.blockNumber !== undefined,
      e: data.lastError ?? null,
      he: data.lastError !== undefined,
    }));
    await timed(
      'outcomes',
      () => db.$executeRaw`UPDATE "ChainOutbox" o SET status = v.s, "blockNumber" = CASE WHEN v.hb THEN v.b ELSE o."blockNumber" END,
        "lastError" = CASE WHEN v.he THEN v.e ELSE o."lastError" END, "updatedAt" = now()
      FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id bigint, s text, b int, hb boolean, e text, he boolean) WHERE o.id = v.id`,
    );
    // The mirrored records' chainStatus after, without waiting for a busy row (retried next round).
    const busy = await timed('records', () =>
      trySettleRecords(
        db,
        items.map(({ row, outcome }) => ({ kind: row.kind, payload: row.payload as Record<string, unknown>, outcome, txHash: row.txHash ?? undefined })),
      ),
    );
    for (const r of busy) recordsBusy.push(r);
    for (const { row, outcome, applied } of items)
      if (row.kind === 'updateStacks' && outcome === 'confirmed' && applied)
        await timed('heads', () => headsMirrored(db, row.payload as Record<string, unknown>, applied));
    // One line per failed intent, or one per batch: a stack whose part cannot apply fails all its
    // rows of the epoch at once, hundreds under load, which would bury the log.
    const failed = items.filter((i) => i.outcome === 'failed');
    if (failed.length <= 3)
      for (const { row, data } of failed)
        log.warn({ outbox: String(row.id), kind: row.kind, ref: row.ref, lastError: data.lastError }, 'cortex: intent failed');
    else {
      const kinds: Record<string, number> = {};
      for (const { row } of failed) kinds[row.kind] = (kinds[row.kind] ?? 0) + 1;
      const reasons = [...new Set(failed.map((f) => f.data.lastError ?? 'failed'))];
      log.warn(
        { count: failed.length, kinds, outbox: failed.slice(0, 5).map((f) => String(f.row.id)), lastError: reasons.slice(0, 5) },
        'cortex: intents failed',
      );
    }
  };
  const settle = (row: Row, outcome: 'confirmed' | 'failed', data: Outcome['data']) => settleAll([{ row, outcome, data }]);

  const receiptOutcome = async (row: Row, r: Receipt): Promise<Outcome> => {
    if (r.status === 1)
      return {
        row,
        outcome: 'confirmed',
        data: { blockNumber: r.blockNumber, lastError: null },
        ...(row.kind === 'updateStacks' ? { applied: appliedHeads(r.logs, chain.suite.contracts.StackIdentity) } : {}),
      };
    // Replaying the call on the block's state names the reason (e.g. the token a same-block intent took).
    let why = '';
    try {
      const t = Transaction.from(row.rawTx!);
      await provider.call({ from, to: t.to, data: t.data, blockTag: r.blockNumber });
    } catch (e) {
      why = `: ${revertReason(e)}`;
    }
    return { row, outcome: 'failed', data: { blockNumber: r.blockNumber, lastError: `reverted in block ${r.blockNumber}${why}` } };
  };

  const broadcast = async (rows: { id: bigint; rawTx: string }[]) => {
    const results = await Promise.allSettled(rows.map((r) => provider.send('eth_sendRawTransaction', [r.rawTx])));
    results.forEach((res, i) => {
      if (res.status === 'rejected') {
        const msg = revertReason(res.reason);
        // Known or already mined: the confirmer sorts it out. Anything else is retried as a drop.
        if (!/already known|nonce too low|already imported|known transaction/i.test(msg))
          log.warn({ outbox: String(rows[i].id), err: msg }, 'cortex: broadcast failed');
      }
    });
  };

  /** Receipts of rows mined in blocks since the last scan. */
  const confirm = async () => {
    // No block since the last scan and no re-send check due: nothing can have changed (a round runs
    // every poll and at every kick; reading every submitted row each time cost most of a round).
    const head = await provider.getBlockNumber();
    if (!firstPass && scannedTo !== undefined && head === scannedTo && Date.now() - lastFullConfirm < dropCheckEveryMs) {
      if (sentUnconfirmed) roundsBusy = true; // waiting for their block: polled at pollMs
      return;
    }
    lastFullConfirm = Date.now();
    // Sent rows only: a ledger row is 'submitted' while its settlement is, with no transaction of its own.
    const rows = await db.chainOutbox.findMany({ where: { status: 'submitted', nonce: { not: null } }, orderBy: { nonce: 'asc' } });
    sentUnconfirmed = rows.length > 0;
    if (sentUnconfirmed) roundsBusy = true;
    if (!rows.length) {
      scannedTo = head;
      firstPass = false;
      return;
    }
    let candidates = rows;
    if (scannedTo !== undefined && head >= scannedTo) {
      const mined = new Set<string>();
      const after = scannedTo;
      await timed('blocks', async () => {
        for (let b = after + 1; b <= head; b++) {
          const block = (await provider.send('eth_getBlockByNumber', [`0x${b.toString(16)}`, false])) as { transactions?: string[] } | null;
          for (const h of block?.transactions ?? []) mined.add(strip0x(h));
        }
      });
      candidates = rows.filter((r) => r.txHash && mined.has(r.txHash));
    }
    scannedTo = head;
    await catchUp();
    const receipts = await timed('receipts', () => Promise.all(candidates.map((r) => receiptOf(provider, r.txHash!))));
    const settled = new Set<bigint>();
    const outcomes: Outcome[] = [];
    for (let i = 0; i < candidates.length; i++) {
      const r = receipts[i];
      if (r) {
        outcomes.push(await receiptOutcome(candidates[i], r));
        settled.add(candidates[i].id);
      }
    }
    await catchUp();
    await settleAll(outcomes);
    await catchUp();
    await timed('drops', () => recoverDropped(rows.filter((r) => !settled.has(r.id))));
    firstPass = false;
  };

  /** Rows the node does not know: re-broadcast the stored bytes; a nonce used by someone else: re-sign. */
  const recoverDropped = async (rows: Row[]) => {
    const now = Date.now();
    if (!rows.length || (!firstPass && now - lastDropCheck < dropCheckEveryMs)) return;
    lastDropCheck = now;
    // The mined nonce count first: a receipt checked after it can only be more recent.
    const minedCount = await provider.getTransactionCount(from, 'latest');
    const resend: Row[] = [];
    // Mined meanwhile: settled together, so no reader sees a later block's row confirmed before an earlier one's.
    const mined: Outcome[] = [];
    for (const row of rows) {
      if (row.nonce! < minedCount) {
        const r = await receiptOf(provider, row.txHash!);
        if (r) mined.push(await receiptOutcome(row, r));
        else {
          // That nonce was mined by another transaction: ours can never land, sign it afresh.
          await db.chainOutbox.update({
            where: { id: row.id },
            data: {
              status: 'pending',
              nonce: null,
              txHash: null,
              rawTx: null,
              sentAt: null,
              lastError: `nonce ${row.nonce} used by another transaction; re-signed`,
            },
          });
          log.warn({ outbox: String(row.id), nonce: row.nonce }, 'cortex: nonce taken by another sender, re-signing');
        }
        continue;
      }
      const age = now - (row.sentAt?.getTime() ?? 0);
      if (!firstPass && age < droppedAfterMs) continue;
      const known = await provider.getTransaction(`0x${row.txHash}`);
      if (!known) resend.push(row);
    }
    // A receipt read here (mined after the confirm's block scan) is settled like the scan's: an epoch
    // that ended meanwhile goes first.
    if (mined.length) await catchUp();
    await settleAll(mined);
    if (!resend.length) return;
    await db.chainOutbox.updateMany({ where: { id: { in: resend.map((r) => r.id) } }, data: { sentAt: new Date(), attempts: { increment: 1 } } });
    log.info({ count: resend.length, nonces: resend.map((r) => r.nonce) }, 'cortex: re-broadcasting dropped transactions');
    await broadcast(resend.map((r) => ({ id: r.id, rawTx: r.rawTx! })));
  };

  // Sent transactions that may still land and change a stack's balance on chain: every sent row not
  // settled, however long ago it was sent. After a restart the node's pool is gone and the rows
  // whose blocks were lost are sent again; this round settles the ended epoch before the drop check
  // re-broadcasts them, so a stack's later rows must wait for them (up to maxWaitMs) rather than
  // fail against the rewound state (counting only rows sent within the drop timeout failed
  // hundreds of burns after an outage longer than it).
  const mayStillLand = () => count(sql`SELECT count(*)::int AS n FROM "ChainOutbox" WHERE status = 'submitted' AND nonce IS NOT NULL`);

  /**
   * The stacks whose part of a settlement waits for transactions in flight (their mint, say, sent
   * but not mined), and the chain's block and the epoch when that was decided. Until a block lands
   * the chain gives the same answer, so the rounds until then plan nothing again: they settle only
   * the rows of epochs that ended meanwhile, of the other stacks. Planned again every round (five a
   * second), a settlement held back re-read and re-planned every pending row, up to 20,000, with up
   * to nine gas estimates a plan, while the chain caught up with a burst of new stacks (10-20 s
   * under the perceive bench's load; 3.5 s of the platform's thread in 5 s).
   */
  let held: { head: number | undefined; epoch: number | undefined; at: number; stacks: Set<number> } | undefined;
  /** How long a hold is trusted without a new block: rows waiting past maxWaitMs must still fail. */
  const heldRecheckMs = Math.min(5000, maxWaitMs);

  /**
   * Folds the pending ledger rows whose epoch has ended into settle rows: per stack and token the
   * net of the rows in id order, checked against the chain first (eth_estimateGas on the pending
   * state) so one stack whose part cannot apply does not hold back the others.
   */
  const settleLedger = async () => {
    const epoch = opts.currentEpoch?.();
    const whole = !held || held.head !== scannedTo || Date.now() - held.at >= heldRecheckMs;
    if (!whole && held!.epoch === epoch) return;
    const settleBefore = new Date(Date.now() - settleAfterMs);
    // 'pending' written out, not a parameter: the partial index ChainLedgerIntent_pending_idx holds
    // only those rows, and a generic plan over a parameter could not use it. An epoch that outlasts
    // settleAfterMs is cut where it stands (all its rows so far in one settlement, the rest at its
    // end), not row by row as each ages: Medulla's blocks vary (p99 1.4 intervals, now and then 3),
    // and the rows of a long epoch would otherwise wait for its end, past two intervals.
    // While stacks are held (see `held`), only the epochs that ended since are read: the rows of the
    // epochs before were settled, failed or held then (one that committed late waits for the next
    // block, or heldRecheckMs).
    const which = whole
      ? sql`(${epoch ?? null}::int IS NULL OR epoch IS NULL OR epoch < ${epoch ?? null}::int
        OR EXISTS (SELECT 1 FROM "ChainLedgerIntent" WHERE status = 'pending' AND "createdAt" < ${settleBefore}))`
      : sql`epoch >= ${held!.epoch ?? 0}::int AND epoch < ${epoch ?? 0}::int`;
    await splitBurns(which);
    const rows = await read<LedgerRow & { createdAt: Date }>(sql`
      SELECT id, kind, payload, epoch, "createdAt" FROM "ChainLedgerIntent"
      WHERE status = 'pending' AND kind <> 'burns' AND ${which}
      ORDER BY id LIMIT 20000`);
    if (rows.length) roundsBusy = true;
    const holding = whole ? new Set<number>() : held!.stacks;
    const hold = (tokenIds: Iterable<number>) => {
      for (const t of tokenIds) holding.add(t);
    };
    if (whole) held = undefined;
    else held!.epoch = epoch;
    try {
      await settleRows(rows, holding, hold);
    } finally {
      if (whole && holding.size) held = { head: scannedTo, epoch, at: Date.now(), stacks: holding };
    }
  };

  /**
   * The `burns` rows settleLedger is about to read (a group commit's burns over several stacks, one
   * row: economy's burnManyPart) become per-stack `burn` rows, summed per stack, epoch and token
   * over every such row (the settlement nets them so anyway); one statement, the rows they replace
   * deleted in it. So every row a plan sees names one stack, and a stack whose part cannot apply is
   * held or failed alone, as before. A row whose payload is not that shape is kept, failed, with why.
   * Through the driver, prepared, as the read after it: it runs every round.
   */
  const splitBurns = (which: Sql) =>
    read(sql`WITH src AS (
        DELETE FROM "ChainLedgerIntent" WHERE status = 'pending' AND kind = 'burns' AND ${which}
        RETURNING id, ref, payload, epoch, "createdAt"),
      checked AS (
        SELECT s.*, coalesce(jsonb_typeof(s.payload->'stacks') = 'array' AND NOT EXISTS (
          SELECT 1 FROM jsonb_array_elements(s.payload->'stacks') e(v)
          WHERE NOT coalesce(jsonb_typeof(e.v->'stackId') = 'string' AND jsonb_typeof(e.v->'amounts') = 'array' AND NOT EXISTS (
            SELECT 1 FROM jsonb_array_elements(e.v->'amounts') a(v)
            WHERE NOT coalesce(jsonb_typeof(a.v->'token') = 'string' AND (a.v->>'milli') ~ '^[0-9]{1,30}$', false)), false)), false) AS ok
        FROM src s),
      sums AS (
        SELECT s.epoch, e.v->>'stackId' AS "stackId", a.v->>'token' AS token, sum((a.v->>'milli')::numeric) AS milli,
          min(s.id) AS first, min(s."createdAt") AS at
        FROM checked s CROSS JOIN LATERAL jsonb_array_elements(s.payload->'stacks') e(v) CROSS JOIN LATERAL jsonb_array_elements(e.v->'amounts') a(v)
        WHERE s.ok GROUP BY 1, 2, 3),
      per_stack AS (
        SELECT epoch, "stackId", min(first) AS first, min(at) AS at,
          jsonb_agg(jsonb_build_object('token', token, 'milli', milli::text) ORDER BY token) AS amounts
        FROM sums GROUP BY 1, 2),
      split AS (
        INSERT INTO "ChainLedgerIntent" (kind, ref, payload, epoch, "createdAt")
        SELECT 'burn', 'ledger:burns:' || first, jsonb_build_object('stackId', "stackId", 'amounts', amounts), epoch, at
        FROM per_stack ORDER BY first, "stackId")
      INSERT INTO "ChainLedgerIntent" (kind, ref, payload, epoch, status, "lastError", "createdAt")
      SELECT 'burns', ref, payload, epoch, 'failed', 'invalid intent: a burns row names {stackId, amounts: [{token, milli}]} per stack', "createdAt"
      FROM checked WHERE NOT ok ORDER BY id`);

  /** Settles rows read by settleLedger; the stacks in `holding` stay pending, and checkPlan adds the ones it holds back. */
  const settleRows = async (rows: (LedgerRow & { createdAt: Date })[], holding: ReadonlySet<number>, hold: (tokenIds: Iterable<number>) => void) => {
    if (!rows.length) return;
    for (const r of rows) {
      r.id = BigInt(r.id);
      r.payload = jsonValue(r.payload);
    }
    const planned = await planSettlements(rows, tokenIdOf);
    const { invalid } = planned;
    const plans = holding.size ? planned.plans.map((plan) => [...plan.byStack.keys()].filter((t) => holding.has(t)).reduce(withoutStack, plan)) : planned.plans;
    for (const [error, ids] of groupBy(
      invalid,
      (i) => i.error,
      (i) => i.row.id,
    ))
      await failLedger(ids, error);
    const inFlight = await mayStillLand();
    const createdAt = new Map(rows.map((r) => [r.id, r.createdAt.getTime()]));
    for (let plan of plans) {
      if (!plan.rowIds.length) continue; // every stack of it held
      // Everything netted to zero: nothing to do on chain, the rows are mirrored as they are.
      if (!plan.entries.length) {
        await db.$executeRaw`UPDATE "ChainLedgerIntent" SET status = 'confirmed', "lastError" = NULL
          WHERE id = ANY(${plan.rowIds.map(String)}::text[]::bigint[]) AND status = 'pending'`;
        continue;
      }
      plan = await checkPlan(plan, inFlight, createdAt, hold);
      if (!plan.rowIds.length) continue;
      const payload: SettlementPayload = { epoch: plan.epoch, entries: plan.entries, rows: plan.rowIds.length };
      // One statement, not an interactive transaction of five round trips (24-106 ms of the settle
      // step under the perceive load): the settle row takes its id from the sequence first, so its
      // payload names it, and the rows are linked to it; if any of them changed meanwhile, the check
      // fails and the whole statement is undone.
      const ids = plan.rowIds.map(String);
      await db.$queryRaw`WITH n AS (SELECT nextval(pg_get_serial_sequence('"ChainOutbox"', 'id')) AS id),
        s AS (INSERT INTO "ChainOutbox" (id, kind, ref, epoch, payload, "updatedAt")
          SELECT n.id, 'settle', ${`settle:${plan.epoch}`}, ${plan.epoch}::int,
            ${JSON.stringify(payload)}::jsonb || jsonb_build_object('settlementId', n.id::text), now() FROM n RETURNING id),
        l AS (UPDATE "ChainLedgerIntent" SET status = 'settled', "settlementId" = (SELECT id FROM s)
          WHERE id = ANY(${ids}::text[]::bigint[]) AND status = 'pending' RETURNING 1)
        SELECT cog_require((SELECT count(*) FROM l) = ${ids.length}, 'settle: ledger rows changed meanwhile') AS ok`;
    }
  };

  /** Ledger rows that can never be settled: failed, with why (the drift check reports them). */
  const failLedger = async (ids: bigint[], reason: string) => {
    if (!ids.length) return;
    await db.$executeRaw`UPDATE "ChainLedgerIntent" SET status = 'failed', "lastError" = ${reason}
      WHERE id = ANY(${ids.map(String)}::text[]::bigint[]) AND status = 'pending'`;
    log.warn({ count: ids.length, ledgerIntents: ids.slice(0, 5).map(String), lastError: reason }, 'cortex: ledger rows failed');
  };

  /** A plan without the stacks whose part reverts: failed (or left pending, `hold`, while in-flight transactions may change the answer). */
  const checkPlan = async (
    plan: SettlementPlan,
    inFlight: number,
    createdAt: Map<bigint, number>,
    hold: (tokenIds: Iterable<number>) => void,
  ): Promise<SettlementPlan> => {
    const bt = chain.suite.contracts.BandwidthToken;
    const slice = timeSlicer();
    for (let attempt = 0; attempt < 8 && plan.entries.length; attempt++) {
      await slice();
      // A settlement id no settle row has (the real one is the row's id, known once stored).
      const probe = buildCall(
        'settle',
        { epoch: plan.epoch, entries: plan.entries, rows: plan.rowIds.length, settlementId: (2n ** 255n).toString() },
        chain.suite,
        tokenIdOf,
      );
      const err = await provider.estimateGas({ from, to: bt, data: (await probe).data, blockTag: 'pending' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (err === undefined) return plan;
      const reason = revertReason(err);
      const m = /^InsufficientStackBalance\((\d+),/.exec(reason);
      if (!m) {
        if (!/revert/i.test(reason)) throw err; // the node, not the call: the round is retried
        break;
      }
      const tokenId = Number(m[1]);
      const ids = plan.byStack.get(tokenId) ?? [];
      const oldest = Math.min(...ids.map((id) => createdAt.get(id) ?? Date.now()));
      if (!(inFlight > 0 && Date.now() - oldest < maxWaitMs)) await failLedger(ids, reason);
      else hold([tokenId]);
      plan = withoutStack(plan, tokenId);
    }
    if (plan.entries.length && plan.rowIds.length) {
      // Still reverting for another reason: the whole plan fails with it (or waits, as above).
      const oldest = Math.min(...plan.rowIds.map((id) => createdAt.get(id) ?? Date.now()));
      if (inFlight > 0 && Date.now() - oldest < maxWaitMs) {
        hold(plan.byStack.keys());
        return { ...plan, rowIds: [], entries: [] };
      }
      const call = await buildCall(
        'settle',
        { epoch: plan.epoch, entries: plan.entries, rows: 0, settlementId: (2n ** 255n).toString() },
        chain.suite,
        tokenIdOf,
      );
      const reason = await provider.estimateGas({ from, to: bt, data: call.data, blockTag: 'pending' }).then(
        () => undefined,
        (e: unknown) => revertReason(e),
      );
      if (reason === undefined) return plan;
      await failLedger(plan.rowIds, reason);
      return { ...plan, rowIds: [], entries: [] };
    }
    return plan;
  };

  /** Resolves to true when it took a full batch (there may be more: run again). */
  const submit = async (): Promise<boolean | undefined> => {
    // Pending rows first: an idle round (every poll, whatever the load) is this one index read,
    // not also the count of what is in flight.
    const pending = await outboxRows(sql`SELECT * FROM "ChainOutbox" WHERE status = 'pending' ORDER BY id LIMIT ${batchSize}::int`);
    if (!pending.length) return;
    roundsBusy = true;
    sentUnconfirmed = true; // what this round sends waits for a block (the next full read of the sent rows says)
    // Sent transactions that may still land and change a stack's balance on chain: not yet
    // (re)broadcast, or broadcast recently. After a restart that lost blocks, the lost ones are
    // re-sent; a stack's later rows wait for them instead of failing against the rewound state.
    const inFlight = await count(sql`SELECT count(*)::int AS n FROM "ChainOutbox" WHERE status = 'submitted' AND nonce IS NOT NULL
      AND ("sentAt" IS NULL OR "sentAt" > ${new Date(Date.now() - droppedAfterMs).toISOString()}::timestamptz)`);
    if (inFlight >= maxInFlight) return;
    const rows = pending.slice(0, maxInFlight - inFlight);
    // Encoding, estimating and signing a batch is seconds of synchronous ethers work at scale: each
    // loop hands the event loop back every few milliseconds (lib/time-slice.ts).
    const slice = timeSlicer();
    const built: { row: Row; call: ChainCall }[] = [];
    await timed('build', async () => {
      for (const row of rows) {
        try {
          built.push({ row, call: await buildCall(row.kind, row.payload as Record<string, unknown>, chain.suite, tokenIdOf) });
        } catch (e) {
          if (!(e instanceof IntentError)) throw e;
          await settle(row, 'failed', { lastError: `invalid intent: ${e.message}` });
        }
        await slice();
      }
    });
    if (!built.length) return;
    // Sent together (each settles as its own answer arrives), built one slice at a time.
    const pendingEstimates: Promise<PromiseSettledResult<bigint>>[] = [];
    for (const b of built) {
      pendingEstimates.push(
        provider.estimateGas({ from, to: b.call.to, data: b.call.data, blockTag: 'pending' }).then(
          (value) => ({ status: 'fulfilled', value }),
          (reason: unknown) => ({ status: 'rejected', reason }),
        ),
      );
      await slice();
    }
    const estimates = await timed('estimate', () => Promise.all(pendingEstimates));
    const [maxNonce, chainNext, fee] = await Promise.all([
      // On the partial nonce index (Prisma's aggregate wraps the table in a subquery the planner
      // cannot answer from an index: a scan of the whole outbox every round).
      read<{ n: number | null }>(sql`SELECT max(nonce) AS n FROM "ChainOutbox" WHERE nonce IS NOT NULL`),
      provider.getTransactionCount(from, 'pending'),
      provider.getFeeData(),
    ]);
    const feeFields = fee.maxFeePerGas
      ? { type: 2, maxFeePerGas: fee.maxFeePerGas, maxPriorityFeePerGas: fee.maxPriorityFeePerGas ?? 0n }
      : { type: 0, gasPrice: fee.gasPrice ?? 1_000_000_000n };
    const ready: { b: (typeof built)[number]; gasLimit: bigint }[] = [];
    for (let i = 0; i < built.length; i++) {
      const est = estimates[i];
      if (est.status === 'rejected') {
        // It may depend on a transaction not mined yet: wait for the in-flight ones before judging.
        if (ready.length || inFlight > 0) break;
        await settle(built[i].row, 'failed', { lastError: revertReason(est.reason) });
        continue;
      }
      ready.push({ b: built[i], gasLimit: (est.value * 12n) / 10n + 10_000n });
    }
    if (!ready.length) return;
    const sentAt = new Date();
    // Stored in one transaction that owns its rows: a row a writer is rewriting right now
    // (a stack's coalesced updateStack, locked by a perceive until it commits) is skipped for this
    // round rather than waited for, and one whose payload changed since it was read goes next
    // round. Nonces are handed out only to the rows stored, so they stay consecutive.
    const firstNonce = Math.max((maxNonce[0]?.n ?? -1) + 1, chainNext);
    const sign = async (list: typeof ready) => {
      const out: { id: bigint; nonce: number; txHash: string; rawTx: string }[] = [];
      let nonce = firstNonce;
      for (const { b, gasLimit } of list) {
        await slice();
        const fields = { to: b.call.to, data: b.call.data, nonce, gasLimit, chainId: chain.chainId, value: 0n };
        const { maxFeePerGas, maxPriorityFeePerGas } = feeFields;
        if (maxFeePerGas !== undefined && maxPriorityFeePerGas !== undefined) {
          // The same bytes as the wallet's in a quarter of its time (sign.ts).
          const { raw, hash } = signEip1559({ ...fields, maxFeePerGas, maxPriorityFeePerGas }, privateKey());
          out.push({ id: b.row.id, nonce, txHash: hash, rawTx: raw });
        } else {
          const rawTx = await chain.wallet.signTransaction({ ...fields, ...feeFields });
          out.push({ id: b.row.id, nonce, txHash: strip0x(keccak256(rawTx)), rawTx });
        }
        nonce++;
      }
      return out;
    };
    // Signed before the transaction, as if every row will be owned: signing is the slow part, and
    // on PGlite a transaction holds the one connection every writer waits for. When a row is skipped
    // (locked or rewritten meanwhile) the nonces after it shift, so the rows kept are signed again
    // inside, as before.
    const presigned = await timed('sign', () => sign(ready));
    const signed = await timed('persist', () =>
      db.$transaction(async (tx) => {
        const ids = ready.map((r) => r.b.row.id.toString());
        const owned = await tx.$queryRaw<{ id: bigint; payload: unknown }[]>`
        SELECT id, payload FROM "ChainOutbox" WHERE id = ANY(${ids}::text[]::bigint[]) AND status = 'pending' FOR UPDATE SKIP LOCKED`;
        const current = new Map(owned.map((r) => [BigInt(r.id), canonicalJson(r.payload)]));
        const kept = ready.filter(({ b }) => current.get(b.row.id) === canonicalJson(b.row.payload));
        const out = kept.length === ready.length ? presigned : await sign(kept);
        if (out.length)
          await tx.$executeRaw`
          UPDATE "ChainOutbox" AS o SET status = 'submitted', nonce = v.nonce, "txHash" = v.hash, "rawTx" = v.raw, "sentAt" = ${sentAt},
            attempts = o.attempts + 1, "updatedAt" = now()
          FROM unnest(${out.map((s) => s.id.toString())}::text[], ${out.map((s) => s.nonce)}::int[], ${out.map((s) => s.txHash)}::text[], ${out.map((s) => s.rawTx)}::text[])
            AS v(id, nonce, hash, raw)
          WHERE o.id = v.id::bigint`;
        return out;
      }),
    );
    if (!signed.length) return;
    await opts.afterPersist?.(signed.map(({ id, nonce, txHash }) => ({ id, nonce, txHash })));
    await timed('broadcast', () => broadcast(signed));
    return rows.length === batchSize;
  };

  /** The epoch whose heads were queued (once an epoch, at its first round; every round without an epoch source). */
  let headsFor: number | undefined;
  const mirrorHeads = async () => {
    const epoch = opts.currentEpoch?.();
    if (epoch !== undefined && epoch === headsFor) return;
    await queueHeads(db, epoch);
    headsFor = epoch;
  };

  // The epoch's own work (settle the ended epoch's ledger rows, queue the moved heads) and sending
  // come before confirming: a round runs at each epoch's start, and a block's receipts (settling
  // their rows) must not hold the ended epoch's rows pending.
  // An epoch that ends while a round is sending has its rows settled (and sent) before that round
  // confirms, not after it: under load a round takes up to a second (sending 150-550 ms, confirming
  // up to 750), and waiting it out aged the ended epoch's rows past two 1 s epochs.
  // The same holds for the confirm, which under load takes up to 1.6 s (a 4 s block's receipts, the
  // records they settle): it stops between its steps to settle and send an epoch that ended
  // meanwhile (`catchUp`), so the ended epoch's rows wait for one step, not for the whole confirm.
  /** The epoch the last epoch work ran in. */
  let workedIn: number | undefined;
  /** Of this round: epochs caught up with after its start, and whether a catch-up's send took a full batch. */
  let caughtUp = 0;
  let catchUpMore = false;
  const epochWork = async () => {
    workedIn = opts.currentEpoch?.();
    if (!closed) await timed('ledger', settleLedger);
    if (!closed) await timed('queueHeads', mirrorHeads);
  };
  /**
   * Called between steps: when an epoch ended since the last epoch work, its rows are settled and
   * sent now. Only where the steps before left nothing half done (a confirmed updateStacks row whose
   * heads are not yet marked mirrored would be queued again by the epoch's heads).
   */
  const catchUp = async () => {
    if (closed || workedIn === undefined || opts.currentEpoch!() === workedIn) return;
    caughtUp++;
    await epochWork();
    if ((await submit()) && !closed) catchUpMore = true;
  };
  const round = async () => {
    const t0 = performance.now();
    steps = {};
    caughtUp = 0;
    catchUpMore = false;
    if (recordsBusy.length) {
      roundsBusy = true;
      await retryRecords();
    }
    await epochWork();
    const t1 = performance.now();
    const more = closed ? false : await submit();
    await catchUp();
    const t2 = performance.now();
    await confirm();
    const t3 = performance.now();
    if (t3 - t0 > 2000)
      log.warn(
        {
          settleMs: Math.round(t1 - t0),
          submitMs: Math.round(t2 - t1),
          confirmMs: Math.round(t3 - t2),
          stepsMs: steps,
          caughtUp,
          recordsBusy: recordsBusy.length,
        },
        'cortex submitter: slow round',
      );
    return more || catchUpMore;
  };

  // One round at a time; a kick during a round (or a full batch) runs one more; then the poll timer.
  let paused = 0;
  const loop = singleFlight(round, {
    stopped: () => closed || paused > 0,
    onError: (e) => log.warn({ err: revertReason(e) }, 'cortex submitter: round failed, will retry'),
    after: () => {
      if (closed) return;
      // Idle rounds back off (200, 400, 800, 1000 ms by default): an idle platform polled five
      // times a second, three statements and a node call each round.
      idleRounds = roundsBusy ? 0 : idleRounds + 1;
      roundsBusy = false;
      pollWait = idleRounds === 0 ? pollMs : Math.min(idlePollMaxMs, pollMs * 2 ** Math.min(idleRounds - 1, 16));
      clearTimeout(timer);
      timer = setTimeout(run, pollWait);
      timer.unref();
    },
  });
  const run = (): Promise<void> => loop.run();

  // Kicks before the first round are left to it (a round reads every open row).
  let holding = !!opts.firstRound;
  if (opts.firstRound)
    void opts.firstRound.then(() => {
      holding = false;
      return run();
    });
  else void run();
  return {
    tick: run,
    kick: () => void (holding || run()),
    pollWaitMs: () => pollWait,
    pause() {
      paused++;
      return loop.settled();
    },
    resume() {
      paused = Math.max(0, paused - 1);
      if (!paused && !holding && !closed) void run();
    },
    async idle(timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        // A settled ledger row is open while its settle row is, which is counted.
        const open =
          (await db.chainOutbox.count({ where: { status: { in: ['pending', 'submitted'] } } })) +
          (await db.chainLedgerIntent.count({ where: { status: 'pending' } }));
        if (!open) return;
        if (Date.now() > until) throw new Error(`cortex outbox not idle after ${timeoutMs} ms: ${open} open rows`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await loop.settled();
    },
  };
}

/** Intents per status: ChainOutbox's rows, and the ledger rows (a settled one counts with its settle row's status). */
export async function outboxStatus(db: Db): Promise<{ pending: number; submitted: number; confirmed: number; failed: number }> {
  const out = { pending: 0, submitted: 0, confirmed: 0, failed: 0 };
  const groups = await db.$queryRaw<{ status: string; n: number }[]>`
    SELECT status, count(*)::int AS n FROM "ChainOutbox" GROUP BY status
    UNION ALL
    SELECT coalesce(s.status, l.status), count(*)::int FROM "ChainLedgerIntent" l LEFT JOIN "ChainOutbox" s ON s.id = l."settlementId"
    GROUP BY coalesce(s.status, l.status)`;
  for (const g of groups) if (g.status in out) out[g.status as keyof typeof out] += g.n;
  return out;
}

/**
 * After a restart on a chain that lost blocks (state snapshot older than the database) or on a
 * fresh chain (suite redeployed), make the outbox match it: rows whose block is gone go back to
 * submitted (same bytes re-broadcast); on a fresh chain every sent row is signed afresh.
 */
export async function rewindToChain(db: Db, provider: JsonRpcProvider, fresh: boolean, log: Logger): Promise<number> {
  if (fresh) {
    const r = await db.chainOutbox.updateMany({
      where: { nonce: { not: null } },
      data: { status: 'pending', nonce: null, txHash: null, rawTx: null, sentAt: null, blockNumber: null, lastError: null },
    });
    // Settled ledger rows ride on their settle row, which is signed afresh with the rest.
    if (r.count) log.warn({ rows: r.count }, 'cortex: fresh chain, replaying the outbox onto the new suite');
    return r.count;
  }
  const head = await provider.getBlockNumber();
  const lost = await db.chainOutbox.findMany({ where: { status: { in: ['confirmed', 'failed'] }, blockNumber: { gt: head } } });
  if (!lost.length) return 0;
  await db.$transaction(async (tx) => {
    for (const row of lost) {
      await tx.chainOutbox.update({ where: { id: row.id }, data: { status: 'submitted', blockNumber: null, sentAt: null } });
      await markRecordPending(tx, row.kind, row.payload as Record<string, unknown>);
    }
  });
  log.warn({ rows: lost.length, head }, 'cortex: chain is behind the outbox, re-sending lost transactions');
  return lost.length;
}

/** Groups of values by key, in first-seen order. */
function groupBy<T, K, V>(items: readonly T[], key: (t: T) => K, value: (t: T) => V): Map<K, V[]> {
  const out = new Map<K, V[]>();
  for (const t of items) {
    const k = key(t);
    let g = out.get(k);
    if (!g) out.set(k, (g = []));
    g.push(value(t));
  }
  return out;
}
