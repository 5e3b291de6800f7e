// The client: every capability of the platform as typed calls. Reads and writes go through the
// GraphQL router (typed documents generated from the supergraph); live events through graphql-ws
// subscriptions and the /v1/events stream, both resumable. Input is checked here first.
import type { Client as WsClient } from 'graphql-ws';
import * as G from './generated/graphql.ts';
import { CogInputError, CogProblem } from './errors.ts';
import { Transport, type RetryOptions } from './transport.ts';
import { resumable, wsClient, type ResumableSubscription, type ResumeOptions, type WebSocketConstructor, type WebSocketLike } from './subscribe.ts';
import { eventStream, type EventStream } from './events.ts';
import { restClient, type RestClient } from './rest.ts';
import type { StackKey } from './sign.ts';
import * as v from './validate.ts';

type NN<T> = NonNullable<T>;
export type Stack = NN<G.StackQuery['stack']>;
export type StackSummary = G.StacksQuery['stacks'][number];
export type CreatedStack = { stack: G.CreateStackMutation['createStack']['stack']; identityPriv: string | null; key: StackKey | null };
export type Sleeve = NN<G.SleeveQuery['sleeve']>;
export type SyncResult = G.SyncSleeveMutation['syncSleeve'];
export type DesyncEntry = G.DesyncQuery['desync'][number];
export type PerceiveResult = G.PerceiveMutation['perceive'];
export type RememberResult = G.RememberMutation['remember'];
export type RecallResult = G.RecallMutation['recall'];
export type ReconstructResult = G.ReconstructQuery['reconstruct'];
export type MemoryNode = NN<G.MemoryNodeQuery['memoryNode']>;
export type HippocampusStats = G.HippocampusStatsQuery['hippocampusStats'];
export type NeedlecastResult = G.NeedlecastMutation['needlecast'];
export type Saga = NN<G.SagaQuery['saga']>;
export type TokenTotals = G.TokenBalancesQuery['tokenBalances'];
export type BalanceSheet = G.BalancesQuery['balances'];
export type CoreTokens = G.FaucetDripMutation['faucetDrip']['granted'];
export type FaucetGrant = G.FaucetDripMutation['faucetDrip'];
export type ClaimResult = G.ClaimEmissionsMutation['claimEmissions'];
export type Emission = G.IssuanceQuery['issuance'][number];
export type Residue = NN<G.ResidueQuery['residue']>;
export type Epoch = G.CurrentEpochQuery['currentEpoch'];
export type Block = NN<G.BlockQuery['block']>;
export type Health = G.HealthQuery;
export type NeedlecastStep = G.NeedlecastProgressSubscription['needlecastProgress'];

/** The subscriptions the router serves, by name, with their variables and events. */
export interface Subscriptions {
  epochAdvanced: [Omit<G.EpochAdvancedSubscriptionVariables, 'after'>, G.EpochAdvancedSubscription['epochAdvanced']];
  blockMined: [Omit<G.BlockMinedSubscriptionVariables, 'after'>, G.BlockMinedSubscription['blockMined']];
  residueOpened: [Omit<G.ResidueOpenedSubscriptionVariables, 'after'>, G.ResidueOpenedSubscription['residueOpened']];
  residueChanged: [Omit<G.ResidueChangedSubscriptionVariables, 'after'>, G.ResidueChangedSubscription['residueChanged']];
  perceived: [Omit<G.PerceivedSubscriptionVariables, 'after'>, G.PerceivedSubscription['perceived']];
  sleeveChanged: [Omit<G.SleeveChangedSubscriptionVariables, 'after'>, G.SleeveChangedSubscription['sleeveChanged']];
  needlecastProgress: [Omit<G.NeedlecastProgressSubscriptionVariables, 'after'>, G.NeedlecastProgressSubscription['needlecastProgress']];
  emission: [Omit<G.EmissionSubscriptionVariables, 'after'>, G.EmissionSubscription['emission']];
}
export type SubscriptionName = keyof Subscriptions;

// biome-ignore lint/suspicious/noExplicitAny: each entry's typed document node; the map is keyed by name
const SUBSCRIPTIONS: { [K in SubscriptionName]: { doc: any; vars: (a: Record<string, unknown>) => Record<string, unknown> } } = {
  epochAdvanced: { doc: G.EpochAdvancedDocument, vars: () => ({}) },
  blockMined: { doc: G.BlockMinedDocument, vars: () => ({}) },
  residueOpened: { doc: G.ResidueOpenedDocument, vars: () => ({}) },
  residueChanged: { doc: G.ResidueChangedDocument, vars: (a) => ({ id: v.optional(a.id, (x) => v.id('id', x)) }) },
  perceived: { doc: G.PerceivedDocument, vars: (a) => ({ stackId: v.stackId('stackId', a.stackId) }) },
  sleeveChanged: { doc: G.SleeveChangedDocument, vars: (a) => ({ stackId: v.stackId('stackId', a.stackId) }) },
  needlecastProgress: { doc: G.NeedlecastProgressDocument, vars: (a) => ({ sagaId: sagaIdOf('sagaId', a.sagaId) }) },
  emission: { doc: G.EmissionDocument, vars: (a) => ({ stackId: v.stackId('stackId', a.stackId) }) },
};
export const SUBSCRIPTION_NAMES = Object.keys(SUBSCRIPTIONS) as SubscriptionName[];

export interface ClientOptions {
  /** The gateway, e.g. http://127.0.0.1:7070 */
  url: string;
  /** Sign every request with this stack's key (COG_AUTH=required). See `withKey`. */
  key?: StackKey;
  retry?: RetryOptions;
  /** Per-request timeout in ms (default 30 000). */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** WebSocket implementation for subscriptions and events (default: the runtime's WebSocket). */
  webSocket?: WebSocketConstructor;
  /** Sees every socket the client opens (tests drop them to prove resumption). */
  onSocket?: (socket: WebSocketLike) => void;
  onRetry?: ConstructorParameters<typeof Transport>[0]['onRetry'];
  headers?: Record<string, string>;
}

function sagaIdOf(field: string, x: unknown): string {
  if (typeof x !== 'string' || !v.SAGA_ID.test(x)) throw new CogInputError(field, 'must have the form needle:<16 to 64 lowercase hex>');
  return x;
}

const notFound = (what: string, id: string) =>
  new CogProblem({ status: 404, code: 'NOT_FOUND', title: `${what} not found`, detail: `No ${what.toLowerCase()} with id ${JSON.stringify(id)}` });

function randomHex(bytes: number): string {
  const b = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export class CogClient {
  readonly http: Transport;
  /** The /v1 REST routes, typed from openapi.json: `rest.get('/v1/stacks/{id}', { params: { id } })`. */
  readonly rest: RestClient;
  private ws: WsClient | null = null;
  private wsConnected = false;
  private readonly shared: { sockets: Set<WebSocketLike> };

  constructor(
    readonly options: ClientOptions,
    shared?: { sockets: Set<WebSocketLike> },
  ) {
    if (typeof options?.url !== 'string' || !/^https?:\/\/[^\s/]+/.test(options.url))
      throw new CogInputError('url', "must be the gateway's http(s) URL, e.g. http://127.0.0.1:7070");
    this.http = new Transport({
      url: options.url,
      key: options.key,
      fetch: options.fetch,
      retry: options.retry,
      timeoutMs: options.timeoutMs,
      headers: options.headers,
      onRetry: options.onRetry,
    });
    this.shared = shared ?? { sockets: new Set() };
    this.rest = restClient(this.http);
  }

  get url(): string {
    return this.http.url;
  }

  /** The key requests are signed with, if any. */
  get key(): StackKey | undefined {
    return this.options.key;
  }

  /** A client that signs as this stack (same gateway and options). */
  withKey(key: StackKey): CogClient {
    v.stackId('key.stackId', key?.stackId);
    v.hex64('key.identityPriv', key?.identityPriv);
    return new CogClient({ ...this.options, key });
  }

  private gql = <R, V>(doc: import('@graphql-typed-document-node/core').TypedDocumentNode<R, V>, vars: V, o?: { timeoutMs?: number }) =>
    this.http.graphql(doc, vars, o);

  private wsClient(): WsClient {
    if (!this.ws) {
      const url = `${this.url.replace(/^http/, 'ws')}/graphql`;
      this.ws = wsClient(url, this.options.webSocket, (s) => {
        this.shared.sockets.add(s);
        this.options.onSocket?.(s);
      });
      this.ws.on('connected', () => (this.wsConnected = true));
      this.ws.on('closed', () => (this.wsConnected = false));
    }
    return this.ws;
  }

  /** @internal Resolves once the subscription socket is connected (or after `ms`). */
  _wsReady(ms = 3000): Promise<void> {
    if (this.wsConnected) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      const off = this.wsClient().on('connected', done);
      function done() {
        clearTimeout(t);
        off();
        resolve();
      }
    });
  }

  /** Closes the client's subscription connection. */
  async close(): Promise<void> {
    const ws = this.ws;
    this.ws = null;
    await ws?.dispose();
  }

  // ---- stacks ---------------------------------------------------------------------------------

  readonly stacks = {
    /**
     * Creates a stack. Shape A: `{name, kind?, cpv?}`: the platform makes the key and returns
     * `identityPriv` once (keep it: it signs for the stack). Shape B: `{pubkey, cpv}` (all five).
     */
    create: async (input: {
      name?: string;
      kind?: v.SleeveKind;
      pubkey?: string;
      cpv?: Partial<Record<(typeof v.CPV_KEYS)[number], number>>;
    }): Promise<CreatedStack> => {
      const o = v.object('input', input);
      const shapeB = o.pubkey !== undefined;
      const vars: G.CreateStackInput = {};
      if (shapeB) {
        vars.pubkey = v.hex64('pubkey', o.pubkey);
        vars.cpv = v.cpv('cpv', o.cpv, true);
        if (o.name !== undefined) vars.name = v.text('name', o.name, { allowEmpty: false });
      } else {
        vars.name = v.text('name', o.name, { allowEmpty: false });
        if (o.kind !== undefined) vars.kind = v.kind('kind', o.kind);
        if (o.cpv !== undefined) vars.cpv = v.cpv('cpv', o.cpv, false);
      }
      const { createStack } = await this.gql(G.CreateStackDocument, { input: vars });
      const priv = createStack.identityPriv ?? null;
      return { stack: createStack.stack, identityPriv: priv, key: priv ? { stackId: createStack.stack.id, identityPriv: priv } : null };
    },
    /** One stack with its sleeves, balances and anchors; NOT_FOUND when unknown. */
    get: async (id: string): Promise<Stack> => {
      const { stack } = await this.gql(G.StackDocument, { id: v.stackId('id', id) });
      if (!stack) throw notFound('Stack', id);
      return stack;
    },
    list: async (o: { first?: number } = {}): Promise<StackSummary[]> =>
      (await this.gql(G.StacksDocument, { first: v.optional(o.first, (x) => v.int('first', x, 1, 1000)) })).stacks,
    /** The newest memory nodes of a stack (metadata; contents stay sealed). */
    memory: async (id: string, o: { first?: number } = {}): Promise<MemoryNode[]> => {
      const { stack } = await this.gql(G.StackMemoryDocument, { id: v.stackId('id', id), first: v.optional(o.first, (x) => v.int('first', x, 1, 1000)) });
      if (!stack) throw notFound('Stack', id);
      return stack.memory;
    },
  };

  // ---- sleeves --------------------------------------------------------------------------------

  readonly sleeves = {
    /** Spawns a sleeve of a kind for a stack; `tickRate` (ms, Shape B) is optional. */
    spawn: async (input: { stackId: string; kind: v.SleeveKind; hostname?: string; tickRate?: number }): Promise<Sleeve> => {
      const o = v.object('input', input);
      const stackId = v.stackId('stackId', o.stackId);
      const kind = v.kind('kind', o.kind ?? o.embodimentType);
      const hostname = v.optional(o.hostname, (x) => v.text('hostname', x, { allowEmpty: false }));
      const tickRate = v.optional(o.tickRate, (x) => v.tickRate('tickRate', x));
      const vars = tickRate === undefined ? { stackId, embodimentType: kind, hostname } : { stackId, kind, tickRate, hostname };
      return (await this.gql(G.SpawnSleeveDocument, vars)).spawnSleeve;
    },
    get: async (id: string): Promise<Sleeve> => {
      const { sleeve } = await this.gql(G.SleeveDocument, { id: v.sleeveId('id', id) });
      if (!sleeve) throw notFound('Sleeve', id);
      return sleeve;
    },
    /** The alive sleeves; `stackId` narrows them to one stack's (alive or not). */
    list: async (o: { stackId?: string } = {}): Promise<Sleeve[]> => {
      if (o.stackId !== undefined) return (await this.stacks.get(v.stackId('stackId', o.stackId))).sleeves;
      return (await this.gql(G.SleevesDocument, {})).sleeves;
    },
    /** Decommissions a sleeve: its tokens return to the stack pool. */
    decommission: async (id: string): Promise<Sleeve> => (await this.gql(G.DecommissionSleeveDocument, { id: v.sleeveId('id', id) })).decommissionSleeve,
    /** Drift to 0 for 1 sync token. */
    sync: async (id: string): Promise<SyncResult> => (await this.gql(G.SyncSleeveDocument, { id: v.sleeveId('id', id) })).syncSleeve,
    desync: async (): Promise<DesyncEntry[]> => (await this.gql(G.DesyncDocument, {})).desync,
  };

  // ---- memory ---------------------------------------------------------------------------------

  readonly memory = {
    /** Writes `text` as a memory node through a sleeve (0.5 compute, drift +1). */
    perceive: async (input: { sleeveId: string; text: string; stackId?: string }): Promise<PerceiveResult> => {
      const o = v.object('input', input);
      return (
        await this.gql(G.PerceiveDocument, {
          sleeveId: v.sleeveId('sleeveId', o.sleeveId),
          text: v.text('text', o.text),
          stackId: v.optional(o.stackId, (x) => v.stackId('stackId', x)),
        })
      ).perceive;
    },
    /** Writes a memory, pinned when `pin` (then it becomes the episodic head and survives decay). */
    remember: async (
      input: { text: string; pin?: boolean } & ({ stackId: string; sleeveId?: undefined } | { sleeveId: string; stackId?: undefined }),
    ): Promise<RememberResult> => {
      const o = v.object('input', input);
      if ((o.stackId === undefined) === (o.sleeveId === undefined)) throw new CogInputError('stackId', 'or sleeveId is required (one of the two)');
      return (
        await this.gql(G.RememberDocument, {
          stackId: v.optional(o.stackId, (x) => v.stackId('stackId', x)),
          sleeveId: v.optional(o.sleeveId, (x) => v.sleeveId('sleeveId', x)),
          text: v.text('text', o.text),
          pin: v.optional(o.pin, (x) => v.bool('pin', x)),
        })
      ).remember;
    },
    /** remember with pin: true (costs 1 memory token more). */
    pin: async (input: { text: string } & ({ stackId: string } | { sleeveId: string })): Promise<RememberResult> =>
      this.memory.remember({ ...(input as { stackId: string; text: string }), pin: true }),
    /** Walks the stack's memory from its head, newest first, decrypting; spends memory tokens. */
    recall: async (input: { stackId: string; depth: number; sleeveId?: string; memoryToken?: number }): Promise<RecallResult> => {
      const o = v.object('input', input);
      return (
        await this.gql(G.RecallDocument, {
          stackId: v.stackId('stackId', o.stackId),
          depth: v.int('depth', o.depth, 1, v.MAX_DEPTH),
          sleeveId: v.optional(o.sleeveId, (x) => v.sleeveId('sleeveId', x)),
          memoryToken: v.optional(o.memoryToken, (x) => v.num('memoryToken', x, 0, 1e12)),
        })
      ).recall;
    },
    /** The DHF compositor's reconstruction through a sleeve's key lease (no charge, no drift). */
    reconstruct: async (input: { stackId: string; sleeveId: string; depth: number }): Promise<ReconstructResult> => {
      const o = v.object('input', input);
      return (
        await this.gql(G.ReconstructDocument, {
          stackId: v.stackId('stackId', o.stackId),
          sleeveId: v.sleeveId('sleeveId', o.sleeveId),
          depth: v.int('depth', o.depth, 1, v.MAX_DEPTH),
        })
      ).reconstruct;
    },
    node: async (cid: string): Promise<MemoryNode> => {
      const { memoryNode } = await this.gql(G.MemoryNodeDocument, { cid: v.id('cid', cid) });
      if (!memoryNode) throw notFound('Memory node', cid);
      return memoryNode;
    },
    stats: async (): Promise<HippocampusStats> => (await this.gql(G.HippocampusStatsDocument, {})).hippocampusStats,
  };

  // ---- needlecast -----------------------------------------------------------------------------

  readonly needlecast = {
    /**
     * Moves a stack's running state from sleeve `from` to `to` (a sleeve of the same stack, or a
     * kind to spawn). `progress` yields each saga step live; `result` resolves when the saga
     * completed (or rejects with its problem). The saga id is chosen here, so the progress
     * subscription is open before the saga starts, and a retry with it is idempotent.
     */
    start: (input: { from: string; to: string; toTickRate?: number; sagaId?: string }): NeedlecastRun => {
      const o = v.object('input', input);
      const from = v.sleeveId('from', o.from);
      const to = typeof o.to === 'string' && o.to.startsWith('sleeve:') ? v.sleeveId('to', o.to) : v.kind('to', o.to);
      const toTickRate = v.optional(o.toTickRate, (x) => v.tickRate('toTickRate', x));
      const sagaId = o.sagaId === undefined ? `needle:${randomHex(16)}` : sagaIdOf('sagaId', o.sagaId);
      return startNeedlecast(this, { from, to, toTickRate, sagaId });
    },
    /** start(), waiting for the result; `onStep` sees each step as it happens. */
    run: async (input: { from: string; to: string; toTickRate?: number; sagaId?: string }, onStep?: (s: NeedlecastStep) => void): Promise<NeedlecastResult> => {
      const run = this.needlecast.start(input);
      const watching = (async () => {
        for await (const s of run.progress) onStep?.(s);
      })();
      try {
        return await run.result;
      } finally {
        await watching.catch(() => {});
      }
    },
    saga: async (id: string): Promise<Saga> => {
      const { saga } = await this.gql(G.SagaDocument, { id: sagaIdOf('id', id) });
      if (!saga) throw notFound('Saga', id);
      return saga;
    },
  };

  /** @internal */
  _needlecastMutation(input: G.NeedlecastInput): Promise<NeedlecastResult> {
    return this.gql(G.NeedlecastDocument, { input }, { timeoutMs: Math.max(this.options.timeoutMs ?? 0, 120_000) }).then((r) => r.needlecast);
  }

  // ---- economy --------------------------------------------------------------------------------

  readonly economy = {
    /** Shape B balance sheet: raw (sleeves + pool), effective (x cpv x EBC), cpv, epochs. */
    balances: async (stackId: string): Promise<BalanceSheet> => (await this.gql(G.BalancesDocument, { stackId: v.stackId('stackId', stackId) })).balances,
    /** Token totals over the stack's alive sleeves. */
    totals: async (stackId: string): Promise<TokenTotals> =>
      (await this.gql(G.TokenBalancesDocument, { stackId: v.stackId('stackId', stackId) })).tokenBalances,
    /** 100 of each core token, split over the alive sleeves; once a minute per stack (RATE_LIMITED). */
    faucet: async (stackId: string): Promise<FaucetGrant> => (await this.gql(G.FaucetDripDocument, { stackId: v.stackId('stackId', stackId) })).faucetDrip,
    /** What the stack could claim now (accrued emission). */
    claimable: async (stackId: string): Promise<CoreTokens> => {
      const { stack } = await this.gql(G.ClaimableDocument, { stackId: v.stackId('stackId', stackId) });
      if (!stack) throw notFound('Stack', stackId);
      return stack.claimable;
    },
    /** Moves the accrued emission into the stack pool. */
    claim: async (stackId: string): Promise<ClaimResult> =>
      (await this.gql(G.ClaimEmissionsDocument, { stackId: v.stackId('stackId', stackId) })).claimEmissions,
    /** The stack's last emissions, newest first. */
    issuance: async (stackId: string, o: { first?: number } = {}): Promise<Emission[]> =>
      (await this.gql(G.IssuanceDocument, { stackId: v.stackId('stackId', stackId), first: v.optional(o.first, (x) => v.int('first', x, 1, 100)) })).issuance,
  };

  // ---- residues -------------------------------------------------------------------------------

  readonly residues = {
    list: async (
      o: { first?: number; status?: 'detected' | 'open' | 'claimed' | 'resolved' | 'expired'; kind?: string; stackId?: string } = {},
    ): Promise<Residue[]> =>
      (
        await this.gql(G.ResiduesDocument, {
          first: v.optional(o.first, (x) => v.int('first', x, 1, 50)),
          status: v.optional(o.status, (x) => v.text('status', x, { allowEmpty: false })),
          kind: v.optional(o.kind, (x) => v.text('kind', x, { allowEmpty: false })),
          stackId: v.optional(o.stackId, (x) => v.stackId('stackId', x)),
        })
      ).residues,
    get: async (id: string): Promise<Residue> => {
      const { residue } = await this.gql(G.ResidueDocument, { id: v.id('id', id) });
      if (!residue) throw notFound('Residue', id);
      return residue;
    },
    /** Submits a proof; the first valid one wins the bounty (minted to the claimant stack's pool). */
    submitProof: async (input: { id: string; claimant: string; proof?: unknown }): Promise<Residue> => {
      const o = v.object('input', input);
      return (await this.gql(G.SubmitResidueProofDocument, { id: v.id('id', o.id), claimant: v.stackId('claimant', o.claimant), proof: o.proof }))
        .submitResidueProof;
    },
  };

  // ---- chains ---------------------------------------------------------------------------------

  readonly chains = {
    /** The current epoch (Medulla's chain info) with its tip block. */
    epoch: async (): Promise<Epoch> => (await this.gql(G.CurrentEpochDocument, {})).currentEpoch,
    block: async (height: number): Promise<Block> => {
      const { block } = await this.gql(G.BlockDocument, { height: v.int('height', height, 0, Number.MAX_SAFE_INTEGER) });
      if (!block) throw notFound('Block', String(height));
      return block;
    },
    /** Mines one Medulla block now. */
    mine: async (): Promise<Block> => (await this.gql(G.MineBlockDocument, {})).mineBlock,
  };

  /** Each subgraph's health and the gateway's own (/healthz). */
  async health(): Promise<{ gateway: { ok: boolean; name: string; ts: number }; subgraphs: Array<{ ok: boolean; name: string }> }> {
    const [gateway, h] = await Promise.all([this.http.request<{ ok: boolean; name: string; ts: number }>('GET', '/healthz'), this.gql(G.HealthDocument, {})]);
    return { gateway, subgraphs: [h.stacksHealth, h.sleevesHealth, h.memoryHealth, h.economyHealth, h.residuesHealth, h.chainsHealth] };
  }

  // ---- live -----------------------------------------------------------------------------------

  /**
   * A subscription as an async iterator that resumes from its last cursor after a dropped
   * connection (no event lost or repeated). `after` resumes from a cursor of an earlier run.
   */
  subscribe<K extends SubscriptionName>(name: K, variables: Subscriptions[K][0], o: ResumeOptions = {}): ResumableSubscription<Subscriptions[K][1]> {
    const spec = SUBSCRIPTIONS[name];
    if (!spec) throw new CogInputError('name', `must be one of ${SUBSCRIPTION_NAMES.join(', ')}`);
    const vars = { ...spec.vars((variables ?? {}) as Record<string, unknown>), after: v.optional(o.after, (x) => v.cursor('after', x)) };
    return resumable(() => this.wsClient(), spec.doc, vars, o) as ResumableSubscription<Subscriptions[K][1]>;
  }

  /** The /v1/events stream (bus events by subject filter), resuming with `since` after a drop. */
  events(o: { subjects?: string | string[]; since?: number } & ResumeOptions = {}): EventStream {
    const subjects = v.subjects('subjects', o.subjects ?? ['cog.>']);
    const since = v.optional(o.since, (x) => Number(v.cursor('since', x)));
    const WS = this.options.webSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS)
      throw new CogProblem({ status: 0, code: 'NO_WEBSOCKET', detail: 'No WebSocket in this runtime: on Node 20 import createClient from "@cog/sdk/node"' });
    return eventStream(this.url, WS, subjects, {
      ...o,
      since,
      onSocket: (s) => {
        this.shared.sockets.add(s);
        this.options.onSocket?.(s);
      },
    });
  }
}

/** A needlecast under way: live steps and the final result. */
export interface NeedlecastRun {
  sagaId: string;
  progress: AsyncIterableIterator<NeedlecastStep>;
  result: Promise<NeedlecastResult>;
}

const TERMINAL = new Set(['completed', 'compensated', 'failed']);
const sleep = (ms: number) => new Promise<null>((r) => setTimeout(() => r(null), ms));

function startNeedlecast(client: CogClient, input: { from: string; to: string; toTickRate?: number; sagaId: string }): NeedlecastRun {
  const sub = client.subscribe('needlecastProgress', { sagaId: input.sagaId });
  const seen = new Set<string>();
  // Open the subscription (the first next() sends it), and start the saga once its socket is up,
  // so the live steps are not missed; the saga's own record fills any gap at the end.
  let pending: Promise<IteratorResult<NeedlecastStep>> | null = sub.next();
  const result = client
    ._wsReady()
    .then(() => client._needlecastMutation({ from: input.from, to: input.to, toTickRate: input.toTickRate, sagaId: input.sagaId }));
  const settled = result.then(
    () => 'settled' as const,
    () => 'settled' as const,
  );
  let tail: NeedlecastStep[] | null = null;
  let ended = false;

  const fresh = (s: NeedlecastStep) => {
    const k = `${s.step}:${s.status}`;
    if (seen.has(k)) return false;
    seen.add(k);
    if (s.step === 'saga' && TERMINAL.has(s.status)) ended = true;
    return true;
  };

  const progress: AsyncIterableIterator<NeedlecastStep> = {
    async next() {
      for (;;) {
        if (ended && !tail) tail = [];
        if (tail) {
          const s = tail.shift();
          if (s) return { value: s, done: false };
          await sub.close();
          return { value: undefined, done: true };
        }
        const p = (pending ??= sub.next());
        // While the saga runs, wait for events; once it answered, give the stream a moment more.
        const won = await Promise.race([p.then((r) => ({ r })), settled.then(() => Promise.race([p.then((r) => ({ r })), sleep(1000)]))]);
        if (won) {
          pending = null;
          if (won.r.done) return { value: undefined, done: true };
          if (fresh(won.r.value)) return { value: won.r.value, done: false };
          continue;
        }
        tail = [];
        try {
          const saga = await client.needlecast.saga(input.sagaId);
          for (const st of saga.steps) {
            const s = { cursor: '', sagaId: saga.id, step: st.name, status: st.status };
            if (st.status !== 'pending' && fresh(s)) tail.push(s);
          }
          const end = { cursor: '', sagaId: saga.id, step: 'saga', status: saga.status };
          if (TERMINAL.has(saga.status) && fresh(end)) tail.push(end);
        } catch {
          /* no saga (refused before it started): the result carries the problem */
        }
      }
    },
    async return() {
      await sub.close();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return progress;
    },
  };
  return { sagaId: input.sagaId, progress, result };
}
