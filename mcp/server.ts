// The platform as an MCP server (one instance per MCP session): tools (mcp/tools.ts, one /v1 route
// each), resources (a stack, its recent memory, the open residues) with update subscriptions fed
// by bus events, and needlecast progress per saga step. Every answer comes from the gateway
// (mcp/gateway.ts); a refused call is a tool error carrying the problem (code, status, detail).
import { randomBytes } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { GatewayUnreachable, type EventSubscription, type Gateway, type GatewayResponse } from './gateway.ts';
import { argumentProblem, compiledTools, fieldProblems, requestOf, type CompiledTool, type ProblemBody } from './tools.ts';

export const SERVER_NAME = 'cog';
export const SERVER_VERSION = '3.0.0';

/**
 * Least time between the last progress notification and the tool's result (ms): long enough for a
 * client on a busy machine to read them apart (see needlecast below; 15 ms lost the last two
 * notifications in a loaded CI run).
 */
const RESULT_AFTER_PROGRESS_MS = 100;

/** SPEC "Needlecast saga": six ordered steps, in this order; progress k of 6 is step k done. */
const SAGA_STEPS = ['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle'];
/** How long a finished needlecast waits for its last step events before reading the saga record. */
const EVENT_GRACE_MS = 3000;
/** Resource subscriptions one session may hold. */
const MAX_SUBSCRIPTIONS = 32;

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const text = (v: unknown) => JSON.stringify(v, null, 2);

const unreachable = (e: GatewayUnreachable) => e.problem;

/** A gateway answer of 400 or more as the problem it carries (a body that is not one still gets a code). */
function problemOf(res: GatewayResponse): ProblemBody {
  const b = res.body && typeof res.body === 'object' && !Array.isArray(res.body) ? (res.body as Record<string, unknown>) : {};
  const code = typeof b.code === 'string' ? b.code : `HTTP_${res.status}`;
  const out: ProblemBody = { ...b, status: typeof b.status === 'number' ? b.status : res.status, code };
  if (typeof b.detail !== 'string' && typeof res.body === 'string') out.detail = res.body.slice(0, 500);
  const retry = res.headers['retry-after'];
  if (retry && out.retryAfter === undefined) out.retryAfter = Number(retry);
  return out;
}

function toolError(problem: ProblemBody): CallToolResult {
  const head = `${problem.code} (${problem.status})${problem.detail ? `: ${problem.detail}` : ''}`;
  return { isError: true, content: [{ type: 'text', text: `${head}\n${text(problem)}` }], structuredContent: { problem } };
}

function toolResult(body: unknown): CallToolResult {
  const structured = body && typeof body === 'object' ? (Array.isArray(body) ? { items: body } : (body as Record<string, unknown>)) : { value: body };
  return { content: [{ type: 'text', text: text(body) }], structuredContent: structured };
}

// ---- resources ---------------------------------------------------------------------------------

interface ResourceKind {
  name: string;
  match(uri: string): Record<string, string> | null;
  /** Bus subjects whose events change what the resource reads. */
  subjects(v: Record<string, string>): string[];
  read(gw: Gateway, v: Record<string, string>): Promise<unknown>;
}

const STACK_URI = /^cog:\/\/stacks\/([^/?#]+)$/;
const MEMORY_URI = /^cog:\/\/stacks\/([^/?#]+)\/memory$/;
const RESIDUES_URI = 'cog://residues/open';
export const stackUri = (id: string) => `cog://stacks/${encodeURIComponent(id)}`;
export const memoryUri = (id: string) => `${stackUri(id)}/memory`;

const decode = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
};

/** Problems reading a resource are JSON-RPC errors carrying the problem as data. */
function resourceError(problem: ProblemBody): McpError {
  const code =
    problem.status === 404 ? -32002 /* resource not found, by MCP convention */ : problem.status < 500 ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new McpError(code, `${problem.code} (${problem.status})${problem.detail ? `: ${problem.detail}` : ''}`, problem);
}

async function ask(gw: Gateway, method: string, path: string, body?: unknown): Promise<unknown> {
  let res: GatewayResponse;
  try {
    res = await gw.request({ method, path, body });
  } catch (e) {
    if (e instanceof GatewayUnreachable) throw resourceError(unreachable(e));
    throw e;
  }
  if (res.status >= 400) throw resourceError(problemOf(res));
  return res.body;
}

/** The memory resource: node metadata only (contents stay sealed; decrypting is recall, which spends tokens). */
const MEMORY_QUERY = 'query McpStackMemory($id: ID!) { stack(id: $id) { id episodicHead memory(first: 20) { cid epoch kind pinned links } } }';

const memoryChanges = (id: string) => [`cog.perceive.${id}`, `cog.memory.remembered.${id}`, `cog.memory.branch.merged.${id}`];
const stackChanges = (id: string) => [...memoryChanges(id), `cog.sleeve.*.${id}`, `cog.faucet.drip.${id}`, `cog.treasury.claimed.${id}`];

const RESOURCES: ResourceKind[] = [
  {
    name: 'stack',
    match: (uri) => {
      const m = STACK_URI.exec(uri);
      const id = m && decode(m[1]!);
      return id ? { stackId: id } : null;
    },
    subjects: (v) => stackChanges(v.stackId!),
    read: (gw, v) => ask(gw, 'GET', `/v1/stacks/${encodeURIComponent(v.stackId!)}`),
  },
  {
    name: 'memory',
    match: (uri) => {
      const m = MEMORY_URI.exec(uri);
      const id = m && decode(m[1]!);
      return id ? { stackId: id } : null;
    },
    subjects: (v) => memoryChanges(v.stackId!),
    read: async (gw, v) => {
      const r = (await ask(gw, 'POST', '/graphql', { query: MEMORY_QUERY, variables: { id: v.stackId } })) as {
        data?: { stack?: unknown };
        errors?: Array<{ message: string; extensions?: { code?: string } }>;
      };
      if (r.errors?.length) throw resourceError({ status: 400, code: r.errors[0]!.extensions?.code ?? 'GRAPHQL_ERROR', detail: r.errors[0]!.message });
      const stack = r.data?.stack as { id: string; episodicHead: string | null; memory: unknown[] } | null | undefined;
      if (!stack) throw resourceError({ status: 404, code: 'NOT_FOUND', title: 'Not found', detail: `Stack ${v.stackId} not found` });
      return { stackId: stack.id, episodicHead: stack.episodicHead, nodes: stack.memory };
    },
  },
  {
    name: 'open residues',
    match: (uri) => (uri === RESIDUES_URI ? {} : null),
    subjects: () => ['cog.residue.>'],
    read: (gw) => ask(gw, 'GET', '/v1/coordination/residues?status=open'),
  },
];

function resourceOf(uri: string): { kind: ResourceKind; vars: Record<string, string> } {
  for (const kind of RESOURCES) {
    const vars = kind.match(uri);
    if (vars) return { kind, vars };
  }
  throw new McpError(ErrorCode.InvalidParams, `Unknown resource ${uri}: use ${RESIDUES_URI}, cog://stacks/{stackId} or cog://stacks/{stackId}/memory`);
}

/** Subjects are tokens separated by dots: an id with a dot or wildcard would subscribe to other subjects. */
const SUBJECT_SAFE = /^[A-Za-z0-9_:-]+$/;

// ---- the server ---------------------------------------------------------------------------------

export interface CogMcpServer {
  server: Server;
  /** Ends every subscription this session holds. */
  close(): Promise<void>;
}

export async function createCogMcpServer(gw: Gateway): Promise<CogMcpServer> {
  const tools = compiledTools();
  const byName = new Map(tools.map((t) => [t.name, t]));
  const server = new Server(
    { name: SERVER_NAME, version: SERVER_VERSION, title: 'Cognitive Agent Platform' },
    {
      capabilities: { tools: {}, resources: { subscribe: true } },
      instructions:
        "Tools map one to one onto the platform's /v1 REST routes. Create a stack (keep its identityPriv), spawn sleeves, perceive through a sleeve, recall from the stack. A refused call is a tool error whose structuredContent.problem carries code, status and detail (errors[] names the argument).",
    },
  );
  const subscriptions = new Map<string, Promise<EventSubscription | null>>();

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description,
      inputSchema: t.inputSchema,
      annotations: {
        title: t.title,
        readOnlyHint: !!t.readOnly,
        destructiveHint: !!t.destructive,
        idempotentHint: !!t.idempotent || !!t.readOnly,
        openWorldHint: false,
      },
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const tool = byName.get(req.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${req.params.name}; tools/list names them`);
    const args = structuredClone(req.params.arguments ?? {}) as Record<string, unknown>;
    if (!tool.validate(args)) return toolError(argumentProblem(fieldProblems(tool.validate.errors)));
    try {
      if (tool.name === 'needlecast') return await needlecast(gw, tool, args, req.params._meta?.progressToken, extra);
      return await callTool(gw, tool, args);
    } catch (e) {
      if (e instanceof GatewayUnreachable) return toolError(unreachable(e));
      throw e;
    }
  });

  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: 'cog://stacks/{stackId}',
        name: 'stack',
        title: 'A stack',
        description: 'The stack with its sleeves and anchors (GET /v1/stacks/:id). Updated on perceive, remember, sleeve changes, drips and claims.',
        mimeType: 'application/json',
      },
      {
        uriTemplate: 'cog://stacks/{stackId}/memory',
        name: 'memory',
        title: "A stack's recent memory",
        description:
          'The 20 newest memory nodes of the stack: cid, epoch, kind, pinned, links (contents stay sealed: the recall tool decrypts). Updated on every write.',
        mimeType: 'application/json',
      },
    ],
  }));

  server.setRequestHandler(ListResourcesRequestSchema, async () => {
    const r = (await ask(gw, 'POST', '/graphql', { query: 'query McpStacks { stacks(first: 100) { id name } }' })) as {
      data?: { stacks?: Array<{ id: string; name: string }> };
    };
    const stacks = r.data?.stacks ?? [];
    return {
      resources: [
        {
          uri: RESIDUES_URI,
          name: 'open residues',
          title: 'Open residues',
          description: 'Residues open for a proof, newest first (GET /v1/coordination/residues?status=open).',
          mimeType: 'application/json',
        },
        ...stacks.flatMap((s) => [
          { uri: stackUri(s.id), name: `stack ${s.name}`, mimeType: 'application/json' },
          { uri: memoryUri(s.id), name: `memory of ${s.name}`, mimeType: 'application/json' },
        ]),
      ],
    };
  });

  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    const { kind, vars } = resourceOf(req.params.uri);
    const body = await kind.read(gw, vars);
    return { contents: [{ uri: req.params.uri, mimeType: 'application/json', text: text(body) }] };
  });

  server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    const uri = req.params.uri;
    const { kind, vars } = resourceOf(uri);
    if (Object.values(vars).some((v) => !SUBJECT_SAFE.test(v)))
      throw new McpError(ErrorCode.InvalidParams, `Cannot watch ${uri}: the id has characters no stack id has`);
    if (subscriptions.has(uri)) return {};
    if (subscriptions.size >= MAX_SUBSCRIPTIONS)
      throw new McpError(ErrorCode.InvalidParams, `At most ${MAX_SUBSCRIPTIONS} resource subscriptions per session; unsubscribe from one first`);
    await kind.read(gw, vars); // an unknown stack is refused now, not watched forever
    let pending: NodeJS.Timeout | undefined;
    const notify = () => {
      if (pending) return;
      // One notification per burst of events (a client re-reads the resource anyway).
      pending = setTimeout(() => {
        pending = undefined;
        void server.sendResourceUpdated({ uri }).catch(() => {});
      }, 50);
    };
    const sub = gw
      .subscribe(kind.subjects(vars), () => notify())
      .catch((e) => {
        subscriptions.delete(uri);
        throw e instanceof GatewayUnreachable ? resourceError(unreachable(e)) : e;
      });
    subscriptions.set(
      uri,
      sub.then((s) => ({
        close: async () => {
          clearTimeout(pending);
          await s.close();
        },
      })),
    );
    await sub;
    return {};
  });

  server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    const sub = subscriptions.get(req.params.uri);
    subscriptions.delete(req.params.uri);
    await (await sub?.catch(() => null))?.close();
    return {};
  });

  const close = async () => {
    const all = [...subscriptions.values()];
    subscriptions.clear();
    await Promise.all(all.map(async (s) => (await s.catch(() => null))?.close()));
  };
  server.onclose = () => void close();
  return { server, close };
}

async function callTool(gw: Gateway, tool: CompiledTool, args: Record<string, unknown>): Promise<CallToolResult> {
  const res = await gw.request(requestOf(tool, args));
  return res.status >= 400 ? toolError(problemOf(res)) : toolResult(res.body);
}

/**
 * needlecast: listens to the saga's step events (`cog.needlecast.step`, the feed of GraphQL
 * `needlecastProgress`) before starting it under a known saga id, and turns each finished step
 * into a progress notification. Steps whose events had not arrived when the saga answered are
 * reported from the saga record, so a client sees every step once, in order.
 */
async function needlecast(
  gw: Gateway,
  tool: CompiledTool,
  args: Record<string, unknown>,
  progressToken: string | number | undefined,
  extra: Extra,
): Promise<CallToolResult> {
  const sagaId = (args.sagaId as string | undefined) ?? `needle:${randomBytes(16).toString('hex')}`;
  let sent = 0;
  let lastSentAt = 0;
  let finished: () => void = () => {};
  const ended = new Promise<void>((r) => (finished = r));
  const progress = async (step: string, status: string) => {
    const k = SAGA_STEPS.indexOf(step) + 1;
    if (progressToken === undefined || k <= sent) return;
    sent = k;
    lastSentAt = performance.now();
    await extra
      .sendNotification({ method: 'notifications/progress', params: { progressToken, progress: k, total: SAGA_STEPS.length, message: `${step} ${status}` } })
      .catch(() => {});
  };
  let queue = Promise.resolve();
  const sub = await gw
    .subscribe(['cog.needlecast.step', 'cog.needlecast.step.>'], (e) => {
      if (e.data.sagaId !== sagaId) return;
      const step = String(e.data.step);
      if (step === 'saga') return finished();
      queue = queue.then(() => progress(step, String(e.data.status)));
    })
    .catch(() => null); // no live feed: the record below still reports every step
  try {
    const res = await gw.request(requestOf(tool, { ...args, sagaId }));
    if (res.status < 400 && sub) await Promise.race([ended, new Promise((r) => setTimeout(r, EVENT_GRACE_MS).unref())]);
    await queue;
    if (progressToken !== undefined && sent < SAGA_STEPS.length) {
      const rec = await gw.request({ method: 'GET', path: `/v1/needlecast/${encodeURIComponent(sagaId)}` });
      const steps = rec.status === 200 ? ((rec.body as { steps?: Array<{ name: string; status: string }> }).steps ?? []) : [];
      for (const s of steps) if (s.status === 'done' || s.status === 'compensated') await progress(s.name, s.status);
      // A step's event that arrived meanwhile sends its notification from the queue: it must be
      // out before the result, after which the client drops the call's notifications.
      await queue;
    }
    // The SDK's client handles a notification a microtask after it reads it and a response at once,
    // dropping the call's progress handler: a last notification read in the same chunk as the
    // result was lost (1 run in 4 here). A few ms between them puts them in separate reads.
    const since = performance.now() - lastSentAt;
    if (lastSentAt && since < RESULT_AFTER_PROGRESS_MS) await new Promise((r) => setTimeout(r, RESULT_AFTER_PROGRESS_MS - since));
    return res.status >= 400 ? toolError(problemOf(res)) : toolResult(res.body);
  } finally {
    await sub?.close();
  }
}
