// Gateway request guards: per-client rate limits, and (with COG_AUTH=required) ed25519-signed
// stack-scoped writes.
//
// Signature scheme (lib/sign.ts builds it; docs/security.md explains it). A client signs with its
// stack's key (the identityPriv seed):
//   message   = METHOD "\n" PATH(with query) "\n" sha256hex(raw body or "") "\n" TIMESTAMP
//   headers   x-cog-stack: <stackId>   x-cog-timestamp: <Unix ms>   x-cog-signature: <128 hex>
// The timestamp must be within COG_AUTH_SKEW_MS (default 30 s) of the server's clock, and a
// signed message is accepted once (replays inside the window are refused: the cache remembers it).
// Every failure is a 401 that changes nothing. Stack creation (POST /v1/stacks, GraphQL
// createStack) needs no signature: there is no key yet.
//
// What needs a signature: every REST write under /v1 (POST, PUT, PATCH, DELETE), the one GET that
// writes (GET /v1/stacks/:id/recall spends memory tokens and moves drift), and GraphQL mutations
// on POST /graphql (graphql-ws refuses mutations, router/ws.ts). Every stack or sleeve a request
// names (route params, query, body fields, GraphQL arguments and variables) must belong to the
// signing stack.
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Kind, getOperationAST, parse, type DocumentNode, type SelectionSetNode, type ValueNode } from 'graphql';
import type { Platform } from '../lib/platform.ts';
import { BODY_LIMIT, isLoopback, sendProblem } from '../lib/http.ts';
import { payloadTooLarge, tooManyRequests, unauthorized } from '../lib/errors.ts';
import { verify } from '../lib/crypto.ts';
import { HEADER_SIGNATURE, HEADER_STACK, HEADER_TIMESTAMP, signingMessage } from '../lib/sign.ts';
import { existingStackIds, stackPubKey } from '../subgraphs/stacks/index.ts';
import { stacksOfSleeves } from '../subgraphs/sleeves/index.ts';

export { signingMessage };

type RawRequest = FastifyRequest & { rawBody?: Buffer };

/** Field names whose string values name a stack or a sleeve (id-like names: `id`, `*Id`, from, to, claimant). */
const ID_KEY = /^(id|.*Id|.*ID|from|to|claimant)$/;
const MAX_IDS = 64;

/** Id-like string values in a JSON value (bounded in depth and count). */
function collectIds(value: unknown, out: Set<string>, key = '', depth = 0): void {
  if (out.size >= MAX_IDS || depth > 6 || value === null || value === undefined) return;
  if (typeof value === 'string') {
    if (ID_KEY.test(key) && value.length > 0 && value.length <= 512) out.add(value);
  } else if (Array.isArray(value)) {
    for (const v of value.slice(0, MAX_IDS)) collectIds(v, out, key, depth + 1);
  } else if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>).slice(0, MAX_IDS)) collectIds(v, out, k, depth + 1);
  }
}

/** A GraphQL argument value, with variables substituted, as plain JSON. */
function valueOfNode(node: ValueNode, variables: Record<string, unknown>): unknown {
  switch (node.kind) {
    case Kind.VARIABLE:
      return variables[node.name.value];
    case Kind.STRING:
    case Kind.ENUM:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.BOOLEAN:
      return node.value;
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map((v) => valueOfNode(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, valueOfNode(f.value, variables)]));
  }
}

interface GraphqlWrite {
  fields: string[];
  ids: Set<string>;
}

/** The mutation a GraphQL request would run (root field names and the ids its arguments name), or null. */
function graphqlWrite(body: unknown, maxTokens: number): GraphqlWrite | null {
  const requests = Array.isArray(body) ? body : [body];
  const out: GraphqlWrite = { fields: [], ids: new Set() };
  for (const r of requests.slice(0, 32)) {
    if (!r || typeof r !== 'object') continue;
    const { query, operationName, variables } = r as Record<string, unknown>;
    if (typeof query !== 'string') continue;
    let doc: DocumentNode;
    try {
      doc = parse(query, { maxTokens, noLocation: true });
    } catch {
      continue; // Apollo refuses it without executing anything
    }
    const op = getOperationAST(doc, typeof operationName === 'string' ? operationName : undefined);
    if (op?.operation !== 'mutation') continue;
    const vars = variables && typeof variables === 'object' && !Array.isArray(variables) ? (variables as Record<string, unknown>) : {};
    const fragments = new Map(doc.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d.selectionSet] as const] : [])));
    const visit = (set: SelectionSetNode, seen: Set<string>) => {
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (sel.name.value === '__typename') continue;
          out.fields.push(sel.name.value);
          for (const a of sel.arguments ?? []) collectIds(valueOfNode(a.value, vars), out.ids, a.name.value);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
          visit(sel.selectionSet, seen);
        } else if (!seen.has(sel.name.value)) {
          const f = fragments.get(sel.name.value);
          if (f) visit(f, new Set([...seen, sel.name.value]));
        }
      }
    };
    visit(op.selectionSet, new Set());
  }
  return out.fields.length ? out : null;
}

/** Mutations that need no signature: creating a stack (there is no key yet). */
const UNSIGNED_MUTATIONS = new Set(['createStack']);

/** What a request must be signed for: null when it needs no signature. */
function writeOf(p: Platform, req: RawRequest): { ids: Set<string> } | null {
  const route = req.routeOptions.url;
  if (!route) return null; // no such route: the 404 handler answers and changes nothing
  if (route === '/graphql') {
    if (req.method !== 'POST') return null; // Apollo runs no mutation over GET
    const w = graphqlWrite(req.body, p.config.graphqlLimits.maxTokens);
    if (!w || w.fields.every((f) => UNSIGNED_MUTATIONS.has(f))) return null;
    return { ids: w.ids };
  }
  if (!route.startsWith('/v1/')) return null;
  const write = !['GET', 'HEAD', 'OPTIONS'].includes(req.method) || route === '/v1/stacks/:id/recall';
  if (!write || (req.method === 'POST' && route === '/v1/stacks')) return null;
  const ids = new Set<string>();
  collectIds(req.params, ids);
  collectIds(req.query, ids);
  collectIds(req.body, ids);
  return { ids };
}

/** The stacks the named ids belong to: stacks as themselves, sleeves as their stack. */
async function owningStacks(p: Platform, ids: Set<string>): Promise<Set<string>> {
  const list = [...ids].filter((s) => typeof s === 'string' && s.length > 0);
  if (!list.length) return new Set();
  const [stacks, ofSleeves] = await Promise.all([existingStackIds(p.db.prisma, list), stacksOfSleeves(p.db.prisma, list)]);
  return new Set([...stacks, ...ofSleeves]);
}

const SIG_RE = /^[0-9a-f]{128}$/;

/** From this limit a minute up, a gateway counts locally and shares its counts in batches (CacheStore). */
const BATCH_FROM = 1000;
/** How often the batched counts go to the cache. */
const SHARE_MS = 50;

type Counted = (err: Error | null, res?: { current: number; ttl: number }) => void;

/**
 * @fastify/rate-limit's store over the platform cache: fixed windows counted with the cache's
 * atomic incr (Redis when distributed, so every gateway process counts together). A cache outage
 * is an error the plugin skips (skipOnError): requests go through.
 *
 * A limit of BATCH_FROM a minute or more is a flood guard, not a quota, and a round trip to Redis
 * a request was a fifth of a gateway's round trips under the mixed load. So there the first
 * request of a window in this process, and every request within a tenth of the limit, count
 * through the cache and wait for its total; the others count locally, answered with the total
 * this process last heard plus its own since (exact for one gateway), and go to the cache
 * together every SHARE_MS. Several gateways may together pass the limit by what the others counted
 * in their last SHARE_MS, and only within a tenth of it. Counts on their way to the cache are
 * counted as `sending` until its total (which holds them) comes back: without that, the requests
 * answered during a batch's round trip saw the total without the batch (a flood test found its
 * own gateway 16 short of exact, once, under a loaded CI run).
 */
export class CacheStore {
  private readonly windows = new Map<string, { window: number; shared: number; sending: number; pending: number; timeWindow: number }>();
  private timer: NodeJS.Timeout | undefined;
  constructor(private readonly cache: Platform['cache']) {}

  incr(key: string, cb: Counted, timeWindow: number, max: number): void {
    const now = Date.now();
    const window = Math.floor(now / timeWindow);
    const ttl = (window + 1) * timeWindow - now;
    const k = `rl:${key}:${window}`;
    const ttlMs = timeWindow + 1000;
    if (!(max >= BATCH_FROM)) {
      this.cache.incr(k, ttlMs).then(
        (current) => cb(null, { current, ttl }),
        (e: Error) => cb(e),
      );
      return;
    }
    const w = this.windows.get(k);
    if (w && w.shared + w.sending + w.pending + 1 <= max - Math.ceil(max / 10)) {
      w.pending++;
      cb(null, { current: w.shared + w.sending + w.pending, ttl });
      return;
    }
    // The window's first request here, or near the limit: through the cache, with what waited.
    const by = (w?.pending ?? 0) + 1;
    if (w) {
      w.pending = 0;
      w.sending += by;
    }
    this.cache.incr(k, ttlMs, by).then(
      (current) => {
        if (w) w.sending -= by;
        this.heard(k, window, current, timeWindow);
        cb(null, { current, ttl });
      },
      (e: Error) => {
        if (w) w.sending -= by;
        cb(e);
      },
    );
  }

  child(): CacheStore {
    return this;
  }

  /** Stops sharing (the gateway closes; counts not sent yet are dropped). */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.windows.clear();
  }

  private heard(k: string, window: number, total: number, timeWindow: number): void {
    const w = this.windows.get(k);
    if (w) w.shared = Math.max(w.shared, total);
    else this.windows.set(k, { window, shared: total, sending: 0, pending: 0, timeWindow });
    this.timer ??= setInterval(() => this.share(), SHARE_MS).unref();
  }

  /** Sends the local counts; forgets past windows once theirs went. */
  private share(): void {
    for (const [k, w] of this.windows) {
      if (w.pending) {
        const by = w.pending;
        w.pending = 0;
        w.sending += by;
        // Lost if the cache is down: those requests went through, as skipOnError lets them.
        this.cache.incr(k, w.timeWindow + 1000, by).then(
          (total) => {
            w.sending -= by;
            w.shared = Math.max(w.shared, total);
          },
          () => void (w.sending -= by),
        );
      } else if (w.window < Math.floor(Date.now() / w.timeWindow)) this.windows.delete(k);
    }
    if (!this.windows.size) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

/**
 * The mark of the gateway's own inner calls (an MCP tool call through inject): a secret of this
 * process, so a client cannot send it. The /mcp message was counted; its inner call is not again.
 */
const INNER_CALL = 'x-cog-inner-call';
const innerSecret = randomBytes(24).toString('hex');
export const innerCallHeaders: Record<string, string> = { [INNER_CALL]: innerSecret };
const isInnerCall = (req: FastifyRequest) => req.headers[INNER_CALL] === innerSecret;

export async function installGuards(app: FastifyInstance, p: Platform): Promise<void> {
  const perMinute = p.config.rateLimitPerMin; // 0 turns it off
  if (perMinute > 0) {
    // Per client address, on every request (routes, unmatched paths, documents), with the
    // x-ratelimit-* headers on every answer and Retry-After on a 429.
    const store = new CacheStore(p.cache);
    app.addHook('onClose', async () => store.close());
    await app.register(rateLimit, {
      global: false,
      max: perMinute,
      timeWindow: 60_000,
      // The plugin constructs its store; this one is made here so the gateway can stop it.
      store: class {
        constructor() {
          // biome-ignore lint/correctness/noConstructorReturn: hands the plugin the store made above
          return store;
        }
      } as never,
      skipOnError: true,
      // The local scraper and probes are never limited (remote ones need the ops token anyway).
      allowList: (req) =>
        isInnerCall(req) ||
        req.routeOptions.url === '/healthz' ||
        ((req.routeOptions.url === '/metrics' || req.routeOptions.url === '/readyz') && isLoopback(req.socket.remoteAddress ?? '')),
      errorResponseBuilder: (_req, ctx) => tooManyRequests(`More than ${ctx.max} requests a minute from this client`, Math.max(1, Math.ceil(ctx.ttl / 1000))),
    });
    app.addHook('onRequest', app.rateLimit());
  }

  if (p.config.auth !== 'required') return;
  const skew = p.config.authSkewMs;
  // Keep the raw body so the signature covers exactly the bytes sent (bounded like any body).
  app.addHook('preParsing', async (req, _reply, payload) => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of payload) {
      const b = Buffer.from(c as Buffer);
      size += b.length;
      if (size > BODY_LIMIT) throw payloadTooLarge(BODY_LIMIT);
      chunks.push(b);
    }
    const raw = Buffer.concat(chunks);
    (req as RawRequest).rawBody = raw;
    return Readable.from([raw]);
  });
  // preValidation: an unsigned request is refused before its body is even validated.
  app.addHook('preValidation', async (req, reply) => {
    const w = writeOf(p, req as RawRequest);
    if (!w) return;
    const refuse = (why: string) => sendProblem(reply, unauthorized(why));
    const stackId = req.headers[HEADER_STACK];
    const ts = req.headers[HEADER_TIMESTAMP];
    const sig = req.headers[HEADER_SIGNATURE];
    if (typeof stackId !== 'string' || typeof ts !== 'string' || typeof sig !== 'string') {
      return refuse('Signed request required: x-cog-stack, x-cog-timestamp and x-cog-signature headers');
    }
    if (!SIG_RE.test(sig)) return refuse('x-cog-signature must be 128 lowercase hex characters');
    if (!/^\d{1,16}$/.test(ts) || Math.abs(Date.now() - Number(ts)) > skew) return refuse('Timestamp outside the allowed clock skew');
    const pubKey = await stackPubKey(p.db.prisma, stackId);
    const message = signingMessage(req.method, req.url, (req as RawRequest).rawBody ?? Buffer.alloc(0), ts);
    if (!pubKey || !verify(sig, new TextEncoder().encode(message), pubKey)) return refuse('Bad signature');
    const owners = await owningStacks(p, w.ids);
    if ([...owners].some((s) => s !== stackId)) return refuse('The signing stack may act only for itself and its own sleeves');
    // Replays: the signed message (not the signature text, which has other encodings) is accepted once.
    const seen = createHash('sha256').update(`${stackId}\n${message}`).digest('hex');
    if (!(await p.cache.setIfAbsent(`sig:${seen}`, '1', skew * 2 + 1000))) return refuse('Replayed signature');
  });
}
