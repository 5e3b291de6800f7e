// Prometheus metrics (prom-client): one registry per process, served at GET /metrics by every
// HTTP service (lib/http.ts), so embedded mode has one /metrics for the whole process. Every metric
// of the platform is declared here, so the names and their labels are in one place (the Grafana
// dashboard test reads `metricNames()`). Labels are bounded sets: services, route templates,
// statuses, kinds, passes, sources; never an id, a key or anything a client chooses freely.
//
// Gauges that need the database are read by one small query at most once per COG_METRICS_CACHE_MS,
// started by a scrape but not waited for (the scrape answers from the last read), so a scrape costs
// at most one query however often it comes, and a busy database never makes it slow.
import client from 'prom-client';
import type { Platform } from './platform.ts';
import { OUTBOX_BATCH_SUBJECT } from './events.ts';

export const registry = new client.Registry();
// The event loop's delay sampled every 50 ms, not prom-client's 10: its timer woke every process's
// loop about 200 times a second (strace of an idle subgraph process: 2,076 epoll waits in 10 s),
// 4.4-4.7 ms of CPU a second against 2.8-2.9 at 50 ms; `cog up --distributed` runs 22 processes
// on the same cores. A stall of 50 ms or more is still seen whenever it happens; the lag gauges
// (nodejs_eventloop_lag_*) keep their names.
client.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 50 });

const seconds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

// ------------------------------------------------------------------ HTTP (lib/http.ts)
export const httpRequests = new client.Counter({
  name: 'cog_http_requests_total',
  help: 'HTTP requests answered, by service, method, route template and status',
  labelNames: ['service', 'method', 'route', 'status'] as const,
  registers: [registry],
});
export const httpDuration = new client.Histogram({
  name: 'cog_http_request_duration_seconds',
  help: 'HTTP request latency, by service, method, route template and status',
  labelNames: ['service', 'method', 'route', 'status'] as const,
  buckets: seconds,
  registers: [registry],
});

// ------------------------------------------------------------------ GraphQL (router/)
export const graphqlOperations = new client.Counter({
  name: 'cog_graphql_operations_total',
  help: 'GraphQL operations, by operation name, type and outcome (ok, error, invalid)',
  labelNames: ['service', 'operation', 'type', 'outcome'] as const,
  registers: [registry],
});
export const graphqlDuration = new client.Histogram({
  name: 'cog_graphql_operation_duration_seconds',
  help: 'GraphQL operation latency, by operation name, type and outcome',
  labelNames: ['service', 'operation', 'type', 'outcome'] as const,
  buckets: seconds,
  registers: [registry],
});
export const coalescedFetches = new client.Counter({
  name: 'cog_graphql_subgraph_fetches_total',
  help: 'Subgraph fetches of the router, by subgraph and result (executed, or joined an identical one: coalescing hits)',
  labelNames: ['subgraph', 'result'] as const,
  registers: [registry],
});
// Subscriptions are labelled by their root field (a fixed set: the router's Subscription type).
export const subscriptionsActive = new client.Gauge({
  name: 'cog_graphql_subscriptions_active',
  help: 'GraphQL subscriptions running (each holds one bus consumer), by subscription field',
  labelNames: ['subscription'] as const,
  registers: [registry],
});
export const subscriptionsStarted = new client.Counter({
  name: 'cog_graphql_subscriptions_total',
  help: 'GraphQL subscriptions started, by subscription field',
  labelNames: ['subscription'] as const,
  registers: [registry],
});

/** Open WebSocket connections, by endpoint; each endpoint registers how to count its own. */
const socketCounters = new Map<string, Set<() => number>>();
export function countSockets(endpoint: 'graphql' | 'events', count: () => number): () => void {
  const set = socketCounters.get(endpoint) ?? new Set();
  socketCounters.set(endpoint, set.add(count));
  return () => void set.delete(count);
}
new client.Gauge({
  name: 'cog_websocket_connections',
  help: 'Open WebSocket connections, by endpoint (graphql: graphql-ws subscriptions, events: /v1/events)',
  labelNames: ['endpoint'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const endpoint of ['graphql', 'events']) {
      let n = 0;
      for (const c of socketCounters.get(endpoint) ?? []) n += c();
      this.set({ endpoint }, n);
    }
  },
});

/**
 * An operation name as a label: GraphQL names are bounded in form but not in number, so the first
 * MAX_OPERATIONS distinct names are kept and the rest are counted as "other".
 */
const MAX_OPERATIONS = 200;
const operationNames = new Set<string>();
export function operationLabel(name: string | null | undefined): string {
  if (!name) return '(anonymous)';
  if (!/^[_A-Za-z][_0-9A-Za-z]{0,63}$/.test(name)) return 'other';
  if (operationNames.has(name)) return name;
  if (operationNames.size >= MAX_OPERATIONS) return 'other';
  operationNames.add(name);
  return name;
}

// ------------------------------------------------------------------ chains, memory, worker
export const foldDuration = new client.Histogram({
  name: 'cog_thalamus_fold_duration_seconds',
  help: 'Thalamus fold of one epoch (reading the sources, roots, storing the tuple)',
  buckets: seconds,
  registers: [registry],
});
export const foldGaps = new client.Counter({
  name: 'cog_thalamus_fold_gaps_total',
  help: 'Folds that went without a source (evm, ipfs, sleeves) because it did not answer',
  labelNames: ['source'] as const,
  registers: [registry],
});
export const passDuration = new client.Histogram({
  name: 'cog_worker_pass_duration_seconds',
  help: 'Worker runner passes, by pass and status (ran, failed; skipped: another runner holds it)',
  labelNames: ['pass', 'status'] as const,
  buckets: seconds,
  registers: [registry],
});
/** Sleeve runtime (subgraphs/sleeves/runtime): how long after its due time a timer tick starts. */
export const sleeveTickLateness = new client.Histogram({
  name: 'cog_sleeve_tick_lateness_seconds',
  help: "Sleeve runtime timer ticks: how long after its due time each started (the tick period is the sleeve's tickRate)",
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32],
  registers: [registry],
});
export const hippocampusFailovers = new client.Counter({
  name: 'cog_hippocampus_failovers_total',
  help: 'Hippocampus calls answered by a node after another failed (HIPPOCAMPUS_FALLBACK_URLS)',
  registers: [registry],
});
export const hippocampusNodeFailures = new client.Counter({
  name: 'cog_hippocampus_node_failures_total',
  help: 'Hippocampus attempts that failed, by reason (unreachable, timeout, 5xx, skipped: failed recently)',
  labelNames: ['reason'] as const,
  registers: [registry],
});
export const hippocampusUnavailable = new client.Counter({
  name: 'cog_hippocampus_unavailable_total',
  help: 'Hippocampus calls no node answered (a 503 to the caller)',
  registers: [registry],
});

// ------------------------------------------------------------------ read at scrape time
interface Sources {
  p: Platform;
  /** Last time this process saw the Medulla tip move (ms). */
  tipSeenAt: number;
  stopEpochs: () => void;
}
let sources: Sources | undefined;
let cacheMs = 1000;

/**
 * Makes the platform's state visible at /metrics (openPlatform calls it). One platform per process:
 * a second one (tests opening several) takes over until it is closed.
 */
export function observePlatform(p: Platform): () => void {
  const s: Sources = { p, tipSeenAt: Date.now(), stopEpochs: () => {} };
  s.stopEpochs = p.epochs.onAdvance(() => void (s.tipSeenAt = Date.now()));
  cacheMs = p.config.metricsCacheMs;
  sources = s;
  snapshot.reset();
  lag.reset();
  return () => {
    s.stopEpochs();
    if (sources === s) sources = undefined;
  };
}

/** Seconds since this process last saw Medulla's tip move (or since it started following it). */
export function tipAgeSeconds(): number | undefined {
  return sources ? (Date.now() - sources.tipSeenAt) / 1000 : undefined;
}

interface Row {
  k: string;
  label: string | null;
  v: number;
}
// One statement, every table through an index or a small table: the kernel's event outbox here,
// and each context's part over its own tables (registerStateGauge: the chain outbox, sagas and
// residues, filtered by their status index), so the kernel names no context's table.
const KERNEL_STATE_SQL = `
SELECT 'event_outbox' AS k, NULL AS label,
  COALESCE(sum(CASE WHEN subject = '${OUTBOX_BATCH_SUBJECT}' THEN jsonb_array_length(data->'events') ELSE 1 END), 0)::float8 AS v FROM "EventOutbox"
UNION ALL SELECT 'event_outbox_age', NULL, COALESCE(EXTRACT(EPOCH FROM now() - min("createdAt")), 0)::float8 FROM "EventOutbox"`;
const stateParts = new Map<string, string>();
const stateSql = () => [KERNEL_STATE_SQL, ...[...stateParts].map(([k, sql]) => `SELECT '${k}', label, v FROM (${sql}) AS "${k}"`)].join('\nUNION ALL ');

/**
 * A value read at most once per cache period, and never waited for once known: a scrape answers
 * from the last read and starts the next one in the background, so a busy database (PGlite's one
 * connection under load) or a slow bus never makes a scrape slow. Only the first read is awaited.
 */
function staleWhileRevalidate<T>(read: () => Promise<T>, fallback: T) {
  let value: { at: number; v: T } | undefined;
  let reading: Promise<T> | undefined;
  const refresh = () =>
    (reading ??= read()
      .catch(() => fallback)
      .then((v) => {
        value = { at: Date.now(), v };
        reading = undefined;
        return v;
      }));
  return {
    get(): Promise<T> | T {
      if (!value || cacheMs === 0) return refresh(); // 0: every scrape reads anew
      if (Date.now() - value.at > cacheMs) void refresh();
      return value.v;
    },
    reset() {
      value = undefined;
    },
  };
}

const snapshot = staleWhileRevalidate<Row[]>(async () => {
  const s = sources;
  if (!s) return [];
  const rows = await s.p.db.prisma.$queryRawUnsafe<Row[]>(stateSql());
  return rows.map((x) => ({ k: x.k, label: x.label, v: Number(x.v) }));
}, []);
/** The database's state (one query per cache period, shared by every gauge and scrape). */
const state = async (): Promise<Row[]> => (sources ? snapshot.get() : []);

/** A gauge set from the state rows of kind `k`, under label `label` when the rows carry one. */
function stateGauge(name: string, help: string, k: string, label?: string, known: string[] = []): void {
  new client.Gauge({
    name,
    help,
    labelNames: label ? [label] : [],
    registers: [registry],
    async collect() {
      const rows = (await state()).filter((r) => r.k === k);
      this.reset();
      if (!sources) return;
      if (!label) return void this.set(rows[0]?.v ?? 0);
      for (const l of known) this.set({ [label]: l }, 0);
      for (const r of rows) if (r.label) this.set({ [label]: r.label }, r.v);
    },
  });
}
stateGauge('cog_event_outbox_depth', 'Events recorded and not yet relayed to the bus', 'event_outbox');
stateGauge('cog_event_outbox_oldest_age_seconds', 'Age of the oldest event waiting in the outbox (0 when empty)', 'event_outbox_age');

/**
 * A gauge over the state of a context's own tables, registered by that context (once per process:
 * a second registration is ignored). `sql` selects rows `(label text, v float8)`, one per label
 * value (label NULL for a gauge without one); it joins the one state statement of each cache period.
 */
export function registerStateGauge(o: { name: string; help: string; sql: string; label?: string; known?: string[] }): void {
  if (registry.getSingleMetric(o.name)) return;
  const k = o.name;
  stateParts.set(k, o.sql);
  stateGauge(o.name, o.help, k, o.label, o.known);
}

new client.Gauge({
  name: 'cog_epoch',
  help: 'The current epoch as this process sees it (Medulla height)',
  registers: [registry],
  collect() {
    this.reset();
    if (sources) this.set(sources.p.epochs.current());
  },
});
new client.Gauge({
  name: 'cog_medulla_tip_age_seconds',
  help: 'Seconds since this process last saw the Medulla tip move',
  registers: [registry],
  collect() {
    this.reset();
    const age = tipAgeSeconds();
    if (age !== undefined) this.set(age);
  },
});
new client.Gauge({
  name: 'cog_db_pool_connections',
  help: 'PostgreSQL pool connections of this process, by state (in_use, idle, max)',
  labelNames: ['state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    const pool = sources?.p.db.pool?.();
    if (!pool) return;
    this.set({ state: 'in_use' }, pool.total - pool.idle);
    this.set({ state: 'idle' }, pool.idle);
    this.set({ state: 'max' }, pool.max);
  },
});
new client.Gauge({
  name: 'cog_db_pool_waiting_clients',
  help: 'Queries of this process waiting for a PostgreSQL pool connection',
  registers: [registry],
  collect() {
    this.reset();
    const pool = sources?.p.db.pool?.();
    if (pool) this.set(pool.waiting);
  },
});

const lag = staleWhileRevalidate<Array<{ consumer: string; pending: number }>>(async () => (await sources?.p.bus.consumerLag?.()) ?? [], []);
new client.Gauge({
  name: 'cog_bus_consumer_pending_messages',
  help: 'Messages a durable bus consumer of this process has not acknowledged yet (its lag), by consumer',
  labelNames: ['consumer'] as const,
  registers: [registry],
  async collect() {
    const bus = sources?.p.bus;
    this.reset();
    if (!bus?.consumerLag) return;
    for (const r of await lag.get()) this.set({ consumer: r.consumer }, r.pending);
  },
});

/** The Prometheus text of every metric of this process. */
export const metricsText = (): Promise<string> => registry.metrics();
export const metricsContentType = registry.contentType;

/** The names of every metric the platform exports (histograms with their _bucket, _sum, _count). */
export async function metricNames(): Promise<string[]> {
  const out: string[] = [];
  for (const m of await registry.getMetricsAsJSON()) {
    out.push(m.name);
    if (String(m.type) === 'histogram') out.push(`${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`);
    if (String(m.type) === 'summary') out.push(`${m.name}_sum`, `${m.name}_count`);
  }
  return out;
}
