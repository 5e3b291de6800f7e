// MCP over Streamable HTTP on the gateway: POST/GET/DELETE /mcp, one MCP session (and server) per
// client, created by its `initialize` POST and named by the `mcp-session-id` header after that.
// Tool calls go through the gateway's own /v1 routes (fastify inject, so rate limits, the
// COG_AUTH guard and validation apply as to any REST client); events come from the bus.
//
// Under COG_AUTH=required the MCP session holds no stack key (the gateway never learns one), so
// writes reach the routes unsigned and come back as UNAUTHORIZED tool errors; reads and
// create_stack work. Signed writes: run `cog mcp` (stdio) with the stack's key beside the agent.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Platform } from '../lib/platform.ts';
import { isLoopback, sendProblem } from '../lib/http.ts';
import { Problem } from '../lib/errors.ts';
import type { CogMcpServer } from './server.ts';

// The MCP SDK (and zod under it), the tools and the SDK client behind them load at the first
// /mcp request, not with the gateway: they were a sixth of its modules' load at start (issue 13).
let loading: ReturnType<typeof loadMcp> | undefined;
async function loadMcp() {
  const [{ StreamableHTTPServerTransport }, { isInitializeRequest }, { injectGateway }, { createCogMcpServer }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
    import('./gateway.ts'),
    import('./server.ts'),
  ]);
  return { StreamableHTTPServerTransport, isInitializeRequest, injectGateway, createCogMcpServer };
}
const mcpModules = () => {
  loading ??= loadMcp();
  loading.catch(() => (loading = undefined)); // a failed load is tried again by the next request
  return loading;
};

export const MCP_PATH = '/mcp';
/** Open sessions at most; a new one past this is a 503 until one closes or idles out. */
export const MAX_SESSIONS = 256;
/** A session nobody used for this long is closed (its subscriptions with it). */
export const SESSION_IDLE_MS = 30 * 60_000;

interface Session {
  transport: StreamableHTTPServerTransport;
  mcp: CogMcpServer;
  lastSeen: number;
}

// Refusals before a session exists are the gateway's problems (the transport spec fixes only the
// status: 400 without a session, 404 for one that is gone, which makes a client initialize anew).
const noSession = () =>
  new Problem(400, 'BAD_REQUEST', 'Bad request', `${MCP_PATH} needs an mcp-session-id header, or an initialize request (POST) to start a session`);
const sessionGone = () => new Problem(404, 'SESSION_NOT_FOUND', 'Not found', 'No such MCP session (it closed or idled out): initialize a new one');

/**
 * DNS rebinding guard (the MCP transport spec asks servers to check Origin): a browser page may
 * reach /mcp only from the gateway's own origin or from loopback.
 */
function originAllowed(req: FastifyRequest): boolean {
  const origin = req.headers.origin;
  if (!origin) return true;
  try {
    const o = new URL(origin);
    return isLoopback(o.hostname) || o.host === req.headers.host;
  } catch {
    return false;
  }
}

/** `innerHeaders`: what the gateway's own calls carry so its rate limit counts the /mcp message, not each inner call too. */
export function mountMcp(app: FastifyInstance, p: Platform, opts: { innerHeaders?: Record<string, string> } = {}): { close(): Promise<void> } {
  const sessions = new Map<string, Session>();
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const s of sessions.values()) if (now - s.lastSeen > SESSION_IDLE_MS) void s.transport.close();
  }, 60_000);
  sweep.unref();

  const handle = async (req: FastifyRequest, reply: FastifyReply) => {
    if (!originAllowed(req))
      return sendProblem(reply, new Problem(403, 'FORBIDDEN_ORIGIN', 'Forbidden', `Origin ${req.headers.origin} may not use ${MCP_PATH}`));
    const sid = req.headers['mcp-session-id'];
    const session = typeof sid === 'string' ? sessions.get(sid) : undefined;
    if (typeof sid === 'string' && !session) return sendProblem(reply, sessionGone());
    if (!session) {
      const { StreamableHTTPServerTransport, isInitializeRequest, injectGateway, createCogMcpServer } = await mcpModules();
      if (req.method !== 'POST' || !isInitializeRequest(req.body)) return sendProblem(reply, noSession());
      if (sessions.size >= MAX_SESSIONS) {
        return sendProblem(
          reply,
          new Problem(503, 'UNAVAILABLE', 'Too many MCP sessions', `At most ${MAX_SESSIONS} open MCP sessions; retry later`, {}, { 'retry-after': '30' }),
        );
      }
      const mcp = await createCogMcpServer(injectGateway({ app, bus: p.bus, remoteAddress: req.ip, headers: opts.innerHeaders }));
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, created);
        },
      });
      const created: Session = { transport, mcp, lastSeen: Date.now() };
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
        void mcp.close();
      };
      await mcp.server.connect(transport);
      reply.hijack();
      await transport.handleRequest(req.raw, reply.raw, req.body);
      // An initialize the transport refused leaves no session behind.
      if (!transport.sessionId || !sessions.has(transport.sessionId)) await transport.close();
      return;
    }
    session.lastSeen = Date.now();
    reply.hijack();
    await session.transport.handleRequest(req.raw, reply.raw, req.body);
  };

  app.post(MCP_PATH, handle);
  app.get(MCP_PATH, handle);
  app.delete(MCP_PATH, handle);

  return {
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((s) => s.transport.close().catch(() => {})));
      sessions.clear();
    },
  };
}
