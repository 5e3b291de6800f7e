// The gateway's rate limit counts an MCP message once: the tool call's inner request to the
// gateway's own /v1 route (fastify inject) carries the process's inner-call mark and is not
// counted again, while a client sending that header itself gains nothing.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, secureGateway, type SecureGateway } from './helpers/secure-gateway.ts';

let g: SecureGateway;
let client: Client;

beforeAll(async () => {
  g = await secureGateway({ COG_RATE_LIMIT_PER_MIN: '1000' });
  client = new Client({ name: 'cog-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${g.url}/mcp`)));
});
afterAll(async () => {
  await client?.close();
  await g?.close();
});

const remaining = async (headers: Record<string, string> = {}) =>
  Number((await call(g.url, 'GET', '/v1/sleeves', undefined, headers)).headers.get('x-ratelimit-remaining'));

describe('MCP and the gateway rate limit', () => {
  it('a tool call costs one request of the client budget, not two', async () => {
    // Inside one fixed minute window (the counter resets at the minute).
    const into = Date.now() % 60_000;
    if (into > 50_000) await new Promise((r) => setTimeout(r, 60_000 - into + 50));
    const before = await remaining();
    const res = await client.callTool({ name: 'list_sleeves', arguments: {} });
    expect(res.isError).toBeFalsy();
    const after = await remaining();
    // The GET that reads it, and the one /mcp POST of the tool call.
    expect(before - after).toBe(2);
  });

  it('a client cannot claim the inner-call mark', async () => {
    const into = Date.now() % 60_000;
    if (into > 50_000) await new Promise((r) => setTimeout(r, 60_000 - into + 50));
    const a = await remaining({ 'x-cog-inner-call': 'guess' });
    const b = await remaining({ 'x-cog-inner-call': 'guess' });
    expect(a - b).toBe(1);
  });
});
