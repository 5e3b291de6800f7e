// `cog mcp`: the platform's MCP server over stdio, for an MCP host to start. It talks to a running
// gateway (COG_BASE_URL or --base-url); with COG_STACK_ID and COG_STACK_KEY (the stack's
// identityPriv) it signs every request, as COG_AUTH=required asks. stdout carries MCP messages
// only: everything else goes to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { httpGateway, type StackKey } from './gateway.ts';
import { createCogMcpServer } from './server.ts';

export const MCP_USAGE = `usage: cog mcp [--base-url URL]
  Serves the platform's MCP tools and resources over stdio (start it from an MCP host).
  --base-url URL   the gateway (default: $COG_BASE_URL, else http://127.0.0.1:$GATEWAY_PORT or :7070)
  environment      COG_STACK_ID and COG_STACK_KEY (64 hex, the stack's identityPriv): sign every
                   request with that stack's key (needed when the platform runs COG_AUTH=required)`;

export class UsageError extends Error {}

export interface McpStdioOptions {
  baseUrl: string;
  key?: StackKey;
}

/** Options from the arguments and environment; a UsageError says what is wrong. */
export function mcpOptions(args: string[], env: NodeJS.ProcessEnv): McpStdioOptions | 'help' {
  let baseUrl = env.COG_BASE_URL || `http://127.0.0.1:${env.GATEWAY_PORT || 7070}`;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--help' || a === '-h') return 'help';
    if (a === '--base-url' && args[i + 1]) baseUrl = args[++i]!;
    else if (a.startsWith('--base-url=')) baseUrl = a.slice('--base-url='.length);
    else throw new UsageError(`unknown argument "${a}"`);
  }
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new UsageError(`the gateway URL "${baseUrl}" is not a URL (set COG_BASE_URL or --base-url, e.g. http://127.0.0.1:7070)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`the gateway URL must be http(s), got ${url.protocol}`);
  const stackId = env.COG_STACK_ID;
  const identityPriv = env.COG_STACK_KEY;
  if (!stackId !== !identityPriv) throw new UsageError("set both COG_STACK_ID and COG_STACK_KEY (the stack's identityPriv), or neither");
  if (identityPriv && !/^[0-9a-f]{64}$/.test(identityPriv))
    throw new UsageError("COG_STACK_KEY must be 64 lowercase hex characters (the identityPriv of the stack's creation response)");
  return { baseUrl: baseUrl.replace(/\/+$/, ''), key: stackId && identityPriv ? { stackId, identityPriv } : undefined };
}

export async function runMcpStdio(args: string[]): Promise<void> {
  let o: McpStdioOptions | 'help';
  try {
    o = mcpOptions(args, process.env);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`cog mcp: ${e.message}\n${MCP_USAGE}\n`);
    process.exit(2);
  }
  if (o === 'help') {
    process.stdout.write(`${MCP_USAGE}\n`);
    return;
  }
  const mcp = await createCogMcpServer(httpGateway({ baseUrl: o.baseUrl, key: o.key }));
  const transport = new StdioServerTransport();
  const stop = async () => {
    await mcp.close();
    await mcp.server.close().catch(() => {});
    process.exit(0);
  };
  // The host ends the server by closing stdin (or a signal).
  process.stdin.once('end', () => void stop());
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
  await mcp.server.connect(transport);
  process.stderr.write(`cog mcp: serving over stdio for the gateway at ${o.baseUrl}${o.key ? ` (signing as ${o.key.stackId})` : ''}\n`);
}
