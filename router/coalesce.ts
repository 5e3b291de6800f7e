// Coalescing of identical subgraph queries. Under load many clients send the same operation at once
// (dashboards polling, agents reading the same stacks); each becomes the same subgraph fetches. A
// fetch for a query identical (text, operation name, variables) to one that is still waiting to start
// joins it instead of running again. A fetch joins only until the shared one starts, so every request
// it serves was already in flight when it read: no client sees a state from before its own request
// (read-your-writes holds; a query that begins after a mutation answered always runs anew). Mutations
// never coalesce. Subgraph answers here do not depend on who asks (the GraphQL context carries no
// caller; auth is checked at the edge), so the key needs no identity. See docs/decisions.md.
import { getOperationAST, parse } from 'graphql';
import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import { coalescedFetches } from '../lib/metrics.ts';

type Response = Awaited<ReturnType<GraphQLDataSource['process']>>;

/** Distinct operation texts whose kind is remembered (query plans are cached, so few). */
const MAX_KINDS = 2000;

/** A plain copy of a JSON-shaped value (graphql-js results use null-prototype objects). */
export function copyJson<T>(v: T): T {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(copyJson) as T;
  const out: Record<string, unknown> = {};
  for (const k in v) out[k] = copyJson((v as Record<string, unknown>)[k]);
  return out as T;
}

/** A joiner's own copy of the answer. */
const copyOf = (r: Response): Response => ({ ...r, data: copyJson(r.data), errors: r.errors ? [...r.errors] : r.errors }) as Response;

export interface CoalesceStats {
  /** Fetches that ran. */
  executed: number;
  /** Fetches answered by joining one that ran. */
  joined: number;
}

export class CoalescingDataSource implements GraphQLDataSource {
  readonly stats: CoalesceStats = { executed: 0, joined: 0 };
  private readonly waiting = new Map<string, { joiners: number; copies: Response[]; result: Promise<Response> }>();
  private readonly kinds = new Map<string, boolean>();

  private readonly ran: { inc(): void };
  private readonly hit: { inc(): void };

  /** `name`: the subgraph, the label of its fetch counts at /metrics. */
  constructor(
    readonly inner: GraphQLDataSource,
    name = 'unnamed',
  ) {
    this.ran = coalescedFetches.labels({ subgraph: name, result: 'executed' });
    this.hit = coalescedFetches.labels({ subgraph: name, result: 'joined' });
  }

  private isQuery(text: string): boolean {
    let q = this.kinds.get(text);
    if (q === undefined) {
      try {
        q = getOperationAST(parse(text))?.operation === 'query';
      } catch {
        q = false; // the inner source reports the parse error
      }
      if (this.kinds.size >= MAX_KINDS) this.kinds.delete(this.kinds.keys().next().value!);
      this.kinds.set(text, q);
    }
    return q;
  }

  async process(options: GraphQLDataSourceProcessOptions): Promise<Response> {
    const text = options.request.query ?? '';
    if (!this.isQuery(text)) {
      this.stats.executed++;
      this.ran.inc();
      return this.inner.process(options);
    }
    const key = `${options.request.operationName ?? ''}\n${text}\n${JSON.stringify(options.request.variables ?? {})}`;
    const pending = this.waiting.get(key);
    if (pending) {
      pending.joiners++;
      this.stats.joined++;
      this.hit.inc();
      await pending.result;
      return pending.copies.pop()!;
    }
    const entry = { joiners: 0, copies: [] as Response[], result: null as unknown as Promise<Response> };
    // Start after the current I/O phase: requests read in the same turn of the event loop join it.
    entry.result = new Promise<void>((r) => setImmediate(r)).then(async () => {
      this.waiting.delete(key);
      this.stats.executed++;
      this.ran.inc();
      const r = await this.inner.process(options);
      // The copies are made before anyone sees the answer: the gateway merges it in place.
      for (let i = 0; i < entry.joiners; i++) entry.copies.push(copyOf(r));
      return r;
    });
    this.waiting.set(key, entry);
    return entry.result;
  }
}
