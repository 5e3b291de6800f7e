// The Cortex's JSON-RPC provider (cortex/deploy.ts providerFor): ethers' own, with request bodies
// encoded by Node. What reaches the node is the same JSON-RPC request, as UTF-8 JSON, and the
// answer comes back as ethers gives it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { providerFor } from '../subgraphs/chains/cortex/deploy.ts';

interface Rpc {
  id: number;
  method: string;
  params: unknown[];
}
let server: http.Server;
const seen: Array<{ type: string | undefined; body: unknown }> = [];
beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // ethers batches what it sends within a few milliseconds: one request or an array of them.
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Rpc | Rpc[];
      const answer = (r: Rpc) => {
        seen.push({ type: req.headers['content-type'], body: r });
        return { jsonrpc: '2.0', id: r.id, result: r.method === 'eth_chainId' ? '0x7a69' : r.params };
      };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(Array.isArray(body) ? body.map(answer) : answer(body)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

it('sends the JSON-RPC request as UTF-8 JSON and returns the result', async () => {
  const provider = providerFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const params = ['héllo ✓ 𝄞', 'x'.repeat(20_000)];
  expect(await provider.send('cog_echo', params)).toEqual(params);
  const req = seen.find((s) => (s.body as { method: string }).method === 'cog_echo')!;
  expect(req.type).toBe('application/json');
  expect(req.body).toMatchObject({ jsonrpc: '2.0', method: 'cog_echo', params });
  provider.destroy();
});
