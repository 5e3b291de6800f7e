// jsonRpc: a JSON-RPC 2.0 POST over node:http, as the Cortex readiness checks make it (anvil's
// eth_chainId): the result, and a refusal for every answer that is not one.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonRpcError, jsonRpc } from './json-rpc.ts';

let server: http.Server;
let url: string;
const seen: Array<{ method?: string; contentType?: string; body: unknown }> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      const body = JSON.parse(text) as { method: string; params: unknown[]; id: number };
      seen.push({ method: req.method, contentType: req.headers['content-type'], body });
      const reply = (status: number, payload: string) => res.writeHead(status, { 'content-type': 'application/json' }).end(payload);
      switch (body.method) {
        case 'eth_chainId':
          return reply(200, JSON.stringify({ jsonrpc: '2.0', id: body.id, result: '0x20000' }));
        case 'echo':
          return reply(200, JSON.stringify({ jsonrpc: '2.0', id: body.id, result: body.params }));
        case 'fails':
          return reply(200, JSON.stringify({ jsonrpc: '2.0', id: body.id, error: { code: -32601, message: 'method not found' } }));
        case 'html':
          return res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>');
        case 'status':
          return reply(500, JSON.stringify({ jsonrpc: '2.0', id: body.id }));
        case 'silent':
          return; // never answers
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('jsonRpc', () => {
  it('posts a JSON-RPC 2.0 request and resolves with its result', async () => {
    expect(await jsonRpc<string>(url, 'eth_chainId')).toBe('0x20000');
    expect(await jsonRpc<unknown[]>(url, 'echo', [1, 'two', { three: 3 }])).toEqual([1, 'two', { three: 3 }]);
    expect(seen[0]).toEqual({ method: 'POST', contentType: 'application/json', body: { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] } });
  });

  it('refuses a JSON-RPC error, a body that is not JSON, an error status and no answer in time', async () => {
    await expect(jsonRpc(url, 'fails')).rejects.toThrow(new JsonRpcError('fails: method not found'));
    await expect(jsonRpc(url, 'html')).rejects.toThrow(new JsonRpcError('html: answered 502 without JSON'));
    await expect(jsonRpc(url, 'status')).rejects.toThrow(new JsonRpcError('status: answered 500'));
    const t0 = Date.now();
    await expect(jsonRpc(url, 'silent', [], 200)).rejects.toThrow(new JsonRpcError('silent: no answer within 200 ms'));
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('refuses when nothing listens', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    await expect(jsonRpc(`http://127.0.0.1:${port}`, 'eth_chainId')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
