// Transactional event outbox: a change and the event announcing it commit together
// (EventOutbox row in the same transaction); the relay publishes to the bus with the row's msgId
// (JetStream de-duplicates a re-publish after a crash) and deletes the row. If the bus is down the
// rows wait and flow when it returns.
import { randomUUID } from 'node:crypto';
import { sql, type Sql, type Tx } from './db/index.ts';
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

/** Several events, in order, as part of a composed statement (lib/db/statement.ts): they commit with the change they announce. */
export function eventsPart(evs: readonly EventRecord[]): StatementPart | null {
  if (!evs.length) return null;
  const rows = evs.map(outboxRow);
  return {
    ctes: [
      {
        name: 'event_outbox',
        body: sql`INSERT INTO "EventOutbox" (subject, "msgId", data, traceparent)
          SELECT r.subject, r."msgId", r.data, r.traceparent
          FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS (subject text, "msgId" text, data jsonb, traceparent text))
            WITH ORDINALITY AS r(subject, "msgId", data, traceparent, n)
          ORDER BY r.n`,
      },
    ],
    committed: () => relayNudge?.(),
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

const FIRST_BATCH = 'SELECT id, subject, "msgId", data, traceparent FROM "EventOutbox" ORDER BY id LIMIT 200';
const DELETE_SENT = 'DELETE FROM "EventOutbox" WHERE id = ANY($1::bigint[])';
// A published batch is deleted by the statement that reads the next one: a round trip a batch, not
// two (under load the relay's reads and deletes were as many statements as the writes it relays).
// Both parts see one snapshot, so the read leaves out the rows the delete removes.
const DELETE_SENT_READ_NEXT = `WITH sent AS (${DELETE_SENT})
  SELECT id, subject, "msgId", data, traceparent FROM "EventOutbox" WHERE id <> ALL($1::bigint[]) ORDER BY id LIMIT 200`;

/** Publishes outbox rows in order; nudged after each recordEvent, and polls as a fallback. */
export function startEventRelay(p: Platform, opts: { pollMs?: number } = {}): { close(): Promise<void>; flush(): Promise<void> } {
  let closed = false;
  type Row = { id: bigint; subject: string; msgId: string; data: unknown; traceparent: string | null };
  // Through the driver (a statement a second, on the hot path's heels): Prisma's engine costs more than the query.
  const read = async (sql: string, params: unknown[]): Promise<Row[]> =>
    (await p.db.driver.query<Omit<Row, 'id'> & { id: string | bigint }>(sql, params, { prepare: true })).map((r) => ({
      ...r,
      id: BigInt(r.id),
      data: jsonValue(r.data),
    }));
  const drain = async () => {
    let rows = await read(FIRST_BATCH, []);
    while (rows.length) {
      // Publish in order, then delete the batch; a crash between the two re-publishes rows the bus
      // de-duplicates by msgId.
      const sent: bigint[] = [];
      try {
        for (const row of rows) {
          const publish = () =>
            p.bus.publish(row.subject, row.data as Record<string, unknown>, {
              msgId: row.msgId,
              traceparent: currentTraceparent() ?? row.traceparent ?? undefined,
            }); // the publish span's own context, so consumers hang under it
          await (row.traceparent
            ? inSpan(
                `publish ${subjectKind(row.subject)}`,
                {
                  kind: SpanKind.PRODUCER,
                  traceparent: row.traceparent,
                  attributes: { 'messaging.system': 'cog-bus', 'messaging.destination.name': subjectKind(row.subject) },
                },
                publish,
              )
            : publish());
          sent.push(row.id);
        }
      } catch (e) {
        if (sent.length) await p.db.driver.query(DELETE_SENT, [sent.map(String)], { prepare: true });
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
  // The relay is nudged from inside writers' transactions; it runs in no trace of theirs (each
  // row's publish joins the trace that wrote it).
  relayNudge = () => void untraced(() => setImmediate(kick));
  const timer = setInterval(kick, opts.pollMs ?? 500);
  timer.unref();
  void kick();
  return {
    flush: kick,
    async close() {
      closed = true;
      clearInterval(timer);
      relayNudge = undefined;
      await relay.settled();
    },
  };
}
