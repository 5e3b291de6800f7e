// Medulla's RPC is internal: with COG_INTERNAL_TOKEN set, a call without the token is refused, and
// peered nodes still converge because every peer call (announce, branch fetch, tip poll) carries
// the token from the validated config.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';

const token = 'medulla-peer-token-0123456789abcdef';
let p: TestPlatform;
let a: MedullaService, b: MedullaService;

beforeAll(async () => {
  p = await testPlatform({ COG_INTERNAL_TOKEN: token });
  const base = { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 64, pollMs: 100 };
  a = await createMedulla(p, { ...base, node: 'node-a' });
  b = await createMedulla(p, { ...base, node: 'node-b' });
  a.node.setPeers([b.url]);
  b.node.setPeers([a.url]);
});
afterAll(async () => {
  for (const s of [a, b]) await s?.close();
  await p?.cleanup();
});

it('refuses RPC without the internal token, and peers converge with it', async () => {
  const bare = await fetch(`${a.url}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getinfo', params: [] }),
  });
  expect(bare.status).toBe(401);
  for (let i = 0; i < 3; i++) await medullaRpc(a.url, 'mineblock', [], { token, timeoutMs: 30_000 });
  const tipA = (await medullaRpc<{ tip: string; height: number }>(a.url, 'getinfo', [], { token })).tip;
  await expect.poll(async () => (await medullaRpc<{ tip: string }>(b.url, 'getinfo', [], { token })).tip, { timeout: 10_000, interval: 100 }).toBe(tipA);
});
