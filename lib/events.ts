// Transactional event outbox: a change and the event announcing it commit together
// (EventOutbox row in the same transaction); the relay publishes to the bus with the row's msgId
// (JetStream de-duplicates a re-publish after a crash) and deletes the row. If the bus is down the
// rows wait and flow when it returns.
//
// The hot path's rows are handed over, not read back (eventsPart with handTo): a statement run on
// the database itself writes its events' row held for HOLD_MS and, once committed, hands it to its
// own process's relay, which publishes it from memory; the next such statement deletes the rows
// published since (the relay deletes them itself when no statement comes within DELETE_WAIT_MS).
// No relay reads a held row from the table, so another process's relay does not publish it too; if
// the writer's process dies first, any relay publishes it once the hold ends. Under the perceive
// load the relay sent a read and a delete (a write transaction) about every batch of writes; now it
// sends none while writes keep coming (docs/decisions.md, "The write path hands its events").
import { randomUUID } from 'node:crypto';
import { sql, type Database, type Sql, type Tx } from './db/index.ts';
import { jsonValue, type StatementPart } from './db/statement.ts';
import { subjectKind } from './bus/port.ts';
import type { Platform } from './platform.ts';
import { singleFlight } from './single-flight.ts';
import { currentTraceparent, inSpan, SpanKind, untraced } from './tracing.ts';

export interface EventRecord {
  subject: string;
  type: string;
  data: Record<string, unknown>;
  msgId?: string;
}

const outboxRow = (ev: EventRecord) => ({
  subject: ev.subject,
  msgId: ev.msgId ?? randomUUID(),
  data: { type: ev.type, ts: Date.now(), ...ev.data } as never,
  // The writer's trace continues at the relay's publish (null when tracing is off).
  traceparent: currentTraceparent() ?? null,
});

/** Writes the event in the caller's transaction. Payloads must never carry secrets. */
export async function recordEvent(tx: Tx, ev: EventRecord): Promise<void> {
  await tx.eventOutbox.create({ data: outboxRow(ev) });
  relayNudge?.();
}

/**
 * The subject of an outbox row that carries several events (eventsPart): never published itself;
 * the relay publishes the events it carries, in order, each with its own subject and msgId.
 */
export const OUTBOX_BATCH_SUBJECT = 'cog.outbox.batch';

/** How long a row handed to its writer's relay is that relay's alone, before any relay may publish it. */
const HOLD_MS = 10_000;
/** A handed row still unpublished after this long is left to the table (its hold is about to end). */
const HANDED_MAX_AGE_MS = HOLD_MS / 2;
/** Published handed rows wait this long for a writer's statement to delete them, then the relay deletes them. */
const DELETE_WAIT_MS = 50;

type OutboxRow = ReturnType<typeof outboxRow>;

/** The relay running in this process on a database, as the statements that hand it rows see it. */
interface Handoff {
  /** A committed held row, to publish. */
  hand(row: OutboxRow & { id: bigint }): void;
  /** The ids of the rows published and not deleted yet, for the statement being built to delete. */
  claimDeletes(): bigint[];
  /** The statement that claimed them did not commit (or ran inside a transaction): they are the relay's again. */
  returnDeletes(ids: readonly bigint[]): void;
}
const handoffs = new WeakMap<Database, Handoff>();

/**
 * Several events, in order, as part of a composed statement (lib/db/statement.ts): they commit with
 * the change they announce. More than one go in one outbox row (OUTBOX_BATCH_SUBJECT). With
 * `handTo`, the database the statement runs on (runStatement on the database itself), while a relay
 * of this process runs on it, the row is held and handed to that relay at commit, and the statement
 * deletes the rows that relay published since the last one (see the head of this file).
 */
export function eventsPart(evs: readonly EventRecord[], opts: { handTo?: Database } = {}): StatementPart | null {
  if (!evs.length) return null;
  const rows = evs.map(outboxRow);
  const row: OutboxRow =
    rows.length === 1
      ? rows[0]!
      : {
          subject: OUTBOX_BATCH_SUBJECT,
          msgId: `batch:${rows[0]!.msgId}`,
          data: { events: rows.map((r) => ({ subject: r.subject, msgId: r.msgId, data: r.data })) } as never,
          traceparent: rows[0]!.traceparent,
        };
  const values = sql`${row.subject}, ${row.msgId}, ${JSON.stringify(row.data)}::jsonb, ${row.traceparent}::text`;
  const relay = opts.handTo && handoffs.get(opts.handTo);
  if (!relay)
    return {
      ctes: [{ name: 'event_outbox', body: sql`INSERT INTO "EventOutbox" (subject, "msgId", data, traceparent) VALUES (${values})` }],
      committed: () => relayNudge?.(),
    };
  const sent = relay.claimDeletes();
  return {
    ctes: [
      {
        name: 'event_outbox',
        body: sql`INSERT INTO "EventOutbox" (subject, "msgId", data, traceparent, "heldUntil")
          VALUES (${values}, now() + ${HOLD_MS}::int * interval '1 millisecond') RETURNING id`,
      },
      ...(sent.length ? [{ name: 'event_outbox_sent', body: sql`DELETE FROM "EventOutbox" WHERE id = ANY(${sent.map(String)}::text[]::bigint[])` }] : []),
    ],
    outputs: [{ name: 'event_outbox_id', expr: sql`(SELECT id::text FROM event_outbox)` }],
    committed: (out) => {
      // Inside a caller's transaction nothing has committed yet: the deletes go back to the relay
      // (deleting a row twice is nothing), and the row waits for its hold to end.
      if (!out) return relay.returnDeletes(sent);
      // The write committed: nothing here may throw. A row whose id did not come back waits for its hold.
      const id = out.event_outbox_id;
      if (typeof id === 'string' && /^\d+$/.test(id)) relay.hand({ id: BigInt(id), ...row }); // spread last: V8's fast copy (docs/decisions.md)
    },
    undone: () => relay.returnDeletes(sent),
  };
}

/**
 * Events made by the statement itself, one per row of `rows` (a SELECT over the statement's CTEs
 * with the columns subject, "msgId", type, data jsonb), as part of a composed statement: for a
 * change whose rows only the database knows (a bulk UPDATE's RETURNING). `name` names the CTE.
 */
export function eventsFromRowsPart(name: string, rows: Sql): StatementPart {
  const ts = Date.now();
  return {
    ctes: [
      {
        name,
        body: sql`INSERT INTO "EventOutbox" (subject, "msgId", data, traceparent)
          SELECT e.subject, e."msgId", jsonb_build_object('type', e.type, 'ts', ${ts}::bigint) || e.data, ${currentTraceparent() ?? null}::text
          FROM (${rows}) e`,
      },
    ],
    committed: () => relayNudge?.(),
  };
}

/**
 * Like recordEvent, for an event several writers (or a re-run) may record under one message id
 * (every Medulla node attaching the same block, a worker pass run again for its epoch): the first
 * row stands, later ones are dropped without failing the transaction, and the bus drops a copy
 * published after the first left the outbox (its duplicate window).
 */
export async function recordEventOnce(tx: Tx, ev: EventRecord & { msgId: string }): Promise<void> {
  await tx.eventOutbox.createMany({ data: [outboxRow(ev)], skipDuplicates: true });
  relayNudge?.();
}

let relayNudge: (() => void) | undefined;

/** The events an OUTBOX_BATCH_SUBJECT row carries (none when its data is not such a list). */
function batchEvents(data: unknown): Array<{ subject: string; msgId: string; data: unknown }> {
  const events = (data as { events?: unknown } | null)?.events;
  return Array.isArray(events) ? events.filter((e) => e && typeof e.subject === 'string' && typeof e.msgId === 'string') : [];
}

// The rows no writer holds: a held row is its writer's relay's until the hold ends.
const UNHELD = `("heldUntil" IS NULL OR "heldUntil" < now())`;
const FIRST_BATCH = `SELECT id, subject, "msgId", data, traceparent FROM "EventOutbox" WHERE ${UNHELD} ORDER BY id LIMIT 200`;
const DELETE_SENT = 'DELETE FROM "EventOutbox" WHERE id = ANY($1::bigint[])';
// A published batch is deleted by the statement that reads the next one: a round trip a batch, not
// two (under load the relay's reads and deletes were as many statements as the writes it relays).
// Both parts see one snapshot, so the read leaves out the rows the delete removes.
const DELETE_SENT_READ_NEXT = `WITH sent AS (${DELETE_SENT})
  SELECT id, subject, "msgId", data, traceparent FROM "EventOutbox" WHERE id <> ALL($1::bigint[]) AND ${UNHELD} ORDER BY id LIMIT 200`;

/**
 * Publishes outbox rows in order; nudged after each recordEvent, and polls as a fallback. The rows
 * this process's statements hand over at commit (eventsPart with handTo) it publishes from memory.
 */
export function startEventRelay(p: Platform, opts: { pollMs?: number; deleteWaitMs?: number } = {}): { close(): Promise<void>; flush(): Promise<void> } {
  let closed = false;
  let closing = false;
  type Row = { id: bigint; subject: string; msgId: string; data: unknown; traceparent: string | null };
  // Through the driver (a statement a second, on the hot path's heels): Prisma's engine costs more than the query.
  const read = async (sql: string, params: unknown[]): Promise<Row[]> =>
    (await p.db.driver.query<Omit<Row, 'id'> & { id: string | bigint }>(sql, params, { prepare: true })).map((r) => ({
      ...r,
      id: BigInt(r.id),
      data: jsonValue(r.data),
    }));
  const remove = (ids: readonly bigint[]) => p.db.driver.query(DELETE_SENT, [ids.map(String)], { prepare: true });
  /** Publishes rows in order, each id into `sent` once all its events went (a throw leaves the rest out). */
  const publishRows = async (rows: readonly Row[], sent: bigint[]) => {
    for (const row of rows) {
      // A row of several events: each in order (a crash or a failed publish part way sends the
      // row's first events again, which the bus de-duplicates by msgId).
      const events = row.subject === OUTBOX_BATCH_SUBJECT ? batchEvents(row.data) : [row];
      if (!row.traceparent) {
        // Untraced (tracing off): the row's events in one call, which the in-process bus journals in one write.
        const traceparent = currentTraceparent();
        await p.bus.publishMany(events.map((ev) => ({ subject: ev.subject, data: ev.data as Record<string, unknown>, msgId: ev.msgId, traceparent })));
      } else {
        for (const ev of events) {
          const publish = () =>
            p.bus.publish(ev.subject, ev.data as Record<string, unknown>, {
              msgId: ev.msgId,
              traceparent: currentTraceparent() ?? row.traceparent ?? undefined,
            }); // the publish span's own context, so consumers hang under it
          await inSpan(
            `publish ${subjectKind(ev.subject)}`,
            {
              kind: SpanKind.PRODUCER,
              traceparent: row.traceparent,
              attributes: { 'messaging.system': 'cog-bus', 'messaging.destination.name': subjectKind(ev.subject) },
            },
            publish,
          );
        }
      }
      sent.push(row.id);
    }
  };

  // Rows handed over at commit, in the order their statements committed, with when they came.
  let handed: Array<{ row: Row; at: number }> = [];
  // Handed rows published and not deleted yet (a writer's next statement deletes them), and since when.
  let unsent: bigint[] = [];
  let unsentSince = 0;
  let deleteTimer: NodeJS.Timeout | undefined;
  const deleteWaitMs = opts.deleteWaitMs ?? DELETE_WAIT_MS;
  const armDelete = () => {
    if (deleteTimer || closed) return;
    deleteTimer = setTimeout(() => {
      deleteTimer = undefined;
      void kick();
    }, deleteWaitMs);
    deleteTimer.unref();
  };
  /** The published ids not deleted yet, taken (by a writer's statement, or by the relay to delete them itself). */
  const takeUnsent = () => {
    const ids = unsent;
    unsent = [];
    unsentSince = 0;
    return ids;
  };
  const toDelete = (ids: readonly bigint[]) => {
    if (!ids.length) return;
    unsent.push(...ids);
    unsentSince ||= Date.now();
    armDelete();
  };
  // A read of the table is due (a nudge of an unheld row, the poll, a flush).
  let fromTable = true;

  const drain = async () => {
    while (handed.length) {
      const now = Date.now();
      const rows = handed.filter((h) => h.at > now - HANDED_MAX_AGE_MS).map((h) => h.row);
      handed = [];
      const sent: bigint[] = [];
      try {
        await publishRows(rows, sent);
      } catch (e) {
        // The bus is down: the rows not sent, and those handed over meanwhile, stay in the table
        // and flow from there once their hold ends (no queue grows in memory while it is down).
        handed = [];
        toDelete(sent);
        throw e;
      }
      toDelete(sent);
    }
    // What no writer's statement deleted in time, the relay does.
    if (unsent.length && (closing || Date.now() - unsentSince >= deleteWaitMs)) {
      const ids = takeUnsent();
      try {
        await remove(ids);
      } catch (e) {
        toDelete(ids);
        throw e;
      }
    } else if (unsent.length) armDelete();
    if (!fromTable) return;
    fromTable = false;
    let rows = await read(FIRST_BATCH, []);
    while (rows.length) {
      // Publish in order, then delete the batch; a crash between the two re-publishes rows the bus
      // de-duplicates by msgId.
      const sent: bigint[] = [];
      try {
        await publishRows(rows, sent);
      } catch (e) {
        fromTable = true;
        if (sent.length) await remove(sent);
        throw e;
      }
      rows = await read(DELETE_SENT_READ_NEXT, [sent.map(String)]);
    }
  };
  const relay = singleFlight(drain, {
    stopped: () => closed,
    onError: (e) => p.log.warn({ err: (e as Error).message }, 'event relay: publish failed, will retry'),
  });
  const kick = () => relay.run();
  const fromTableKick = () => {
    fromTable = true;
    return kick();
  };
  // The relay is nudged from inside writers' transactions; it runs in no trace of theirs (each
  // row's publish joins the trace that wrote it).
  relayNudge = () => void untraced(() => setImmediate(fromTableKick));
  handoffs.set(p.db, {
    hand: (row) => {
      if (closing) return; // published from the table once its hold ends
      handed.push({ row, at: Date.now() });
      untraced(() => setImmediate(kick));
    },
    claimDeletes: takeUnsent,
    returnDeletes: toDelete,
  });
  const timer = setInterval(fromTableKick, opts.pollMs ?? 500);
  timer.unref();
  void fromTableKick();
  return {
    flush: fromTableKick,
    async close() {
      clearInterval(timer);
      relayNudge = undefined;
      handoffs.delete(p.db);
      // What was handed over is published, and what was published deleted, before the relay stops.
      closing = true;
      await relay.settled();
      await kick();
      closed = true;
      if (deleteTimer) clearTimeout(deleteTimer);
      await relay.settled();
    },
  };
}
