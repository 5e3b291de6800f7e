// MCP under COG_AUTH=required, on a real gateway (in-process test platform, loopback, port 0):
// `cog mcp` with COG_STACK_ID / COG_STACK_KEY signs its requests, so its writes pass and act for
// that stack only; without a key, and on the gateway's /mcp (which holds none), writes come back
// as UNAUTHORIZED tool errors and change nothing, while reads and create_stack work.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { call, secureGateway, snapshot, type SecureGateway } from './helpers/secure-gateway.ts';
import { signRequest } from '../lib/sign.ts';
import { mcpOptions, UsageError } from '../mcp/stdio.ts';

const root = path.resolve(import.meta.dirname, '..');
let g: SecureGateway;
const clients: Client[] = [];
let alice: { stackId: string; identityPriv: string; sleeveId: string };
let bob: { stackId: string; sleeveId: string };

async function stdio(env: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'cog-auth-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [path.join(root, 'bin', 'cog.mjs'), 'mcp'],
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', COG_BASE_URL: g.url, ...env },
      stderr: 'ignore',
    }),
  );
  clients.push(client);
  return client;
}

const tool = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;
const problem = (r: CallToolResult) => {
  expect(r.isError, JSON.stringify(r.content)).toBe(true);
  return (r.structuredContent as { problem: { code: string; status: number } }).problem;
};

beforeAll(async () => {
  g = await secureGateway({ COG_AUTH: 'required', COG_RATE_LIMIT_PER_MIN: '0' });
  // Two stacks made over plain REST (creation needs no signature); bob's sleeve spawned signed by bob.
  const a = (await call(g.url, 'POST', '/v1/stacks', { name: 'alice' })).body;
  const b = (await call(g.url, 'POST', '/v1/stacks', { name: 'bob' })).body;
  const body = { stackId: b.id, embodimentType: 'human' };
  const sb = await call(
    g.url,
    'POST',
    '/v1/sleeves',
    body,
    signRequest({ method: 'POST', path: '/v1/sleeves', body, stackId: b.id, identityPriv: b.identityPriv }),
  );
  expect(sb.status, sb.text).toBe(201);
  alice = { stackId: a.id, identityPriv: a.identityPriv, sleeveId: '' };
  bob = { stackId: b.id, sleeveId: sb.body.id };
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await g?.close();
});

describe('MCP with COG_AUTH=required', () => {
  it('cog mcp signs with the stack key from its environment: writes pass, for that stack only', async () => {
    const c = await stdio({ COG_STACK_ID: alice.stackId, COG_STACK_KEY: alice.identityPriv });
    const spawned = await tool(c, 'spawn_sleeve', { stackId: alice.stackId, embodimentType: 'ai' });
    expect(spawned.isError, JSON.stringify(spawned.content)).toBeFalsy();
    alice.sleeveId = (spawned.structuredContent as { id: string }).id;
    const p = await tool(c, 'perceive', { sleeveId: alice.sleeveId, input: 'signed over mcp' });
    expect(p.isError, JSON.stringify(p.content)).toBeFalsy();
    const recalled = await tool(c, 'recall', { stackId: alice.stackId, depth: 3 });
    expect((recalled.structuredContent as { fragments: Array<{ text: string }> }).fragments[0]!.text).toBe('signed over mcp');
    // The gateway's own rule: a stack signs for itself and its sleeves, not bob's.
    const before = await snapshot(g.p);
    expect(problem(await tool(c, 'perceive', { sleeveId: bob.sleeveId, input: 'intrude' }))).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
    expect(await snapshot(g.p)).toBe(before);
  });

  it('cog mcp without a key, and /mcp, get UNAUTHORIZED tool errors for writes; reads and create_stack work', async () => {
    const http = new Client({ name: 'cog-auth-test', version: '1.0.0' });
    await http.connect(new StreamableHTTPClientTransport(new URL(`${g.url}/mcp`)));
    clients.push(http);
    for (const c of [await stdio({}), http]) {
      const before = await snapshot(g.p);
      expect(problem(await tool(c, 'perceive', { sleeveId: alice.sleeveId, input: 'unsigned' }))).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
      expect(problem(await tool(c, 'faucet_drip', { stackId: alice.stackId }))).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
      expect(await snapshot(g.p)).toBe(before);
      const read = await tool(c, 'get_stack', { stackId: alice.stackId });
      expect((read.structuredContent as { id: string }).id).toBe(alice.stackId);
      const created = await tool(c, 'create_stack', { name: 'newcomer' });
      expect((created.structuredContent as { identityPriv: string }).identityPriv).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it('cog mcp refuses a malformed or half-given key, saying which variable', () => {
    const env = { COG_BASE_URL: g.url };
    expect(() => mcpOptions([], { ...env, COG_STACK_ID: alice.stackId, COG_STACK_KEY: 'not-hex' })).toThrow(/COG_STACK_KEY must be 64 lowercase hex/);
    expect(() => mcpOptions([], { ...env, COG_STACK_ID: alice.stackId })).toThrow(UsageError);
    expect(() => mcpOptions(['--base-url', 'ftp://x'], env)).toThrow(/http\(s\)/);
    expect(mcpOptions(['--base-url', 'http://127.0.0.1:9/'], { COG_STACK_ID: alice.stackId, COG_STACK_KEY: alice.identityPriv })).toEqual({
      baseUrl: 'http://127.0.0.1:9',
      key: { stackId: alice.stackId, identityPriv: alice.identityPriv },
    });
  });
});
