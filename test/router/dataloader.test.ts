import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { testPlatform, type TestPlatform } from '../helpers/platform.ts';
import { stackRow } from '../helpers/stack-rows.ts';
import { startGateway } from '../../router/service.ts';
import type { RunningService } from '../../lib/service.ts';

let p: TestPlatform;
let gw: RunningService;

beforeAll(async () => {
  p = await testPlatform({ GATEWAY_PORT: '0', COG_GRAPHQL_MAX_COST: '100000' });
  gw = await startGateway(p);
  const stacks = Array.from({ length: 100 }, (_, i) => ({ ...stackRow(i), episodicHead: `cog://${'a'.repeat(64)}@${i}` }));
  await p.db.prisma.stack.createMany({ data: stacks });
  await p.db.prisma.sleeve.createMany({
    data: stacks.flatMap((s, i) =>
      [0, 1].map((j) => ({
        id: `sleeve:ai:${i * 2 + j + 1}:${(i * 2 + j).toString(16).padStart(8, '0')}`,
        stackId: s.id,
        embodimentType: 'ai',
        shape: 'A',
        tickRate: 2000,
      })),
    ),
  });
  await p.db.prisma.memoryNode.createMany({
    data: stacks.map((s, i) => ({ cid: `cog://${i.toString(16).padStart(64, '0')}@0`, stackId: s.id, epoch: 0, links: [], size: 1 })),
  });
});
afterAll(async () => {
  await gw?.close();
  await p?.cleanup();
});

describe('DataLoader batching', () => {
  it('100 stacks with sleeves, balances, heads and memory take a bounded number of queries', async () => {
    const before = p.db.statementCount();
    const r = await fetch(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ stacks(first: 100) { id episodicHead sleeves { id stack { name } } balances { compute } memory(first: 2) { cid } } }' }),
    });
    const body = (await r.json()) as { data: { stacks: { sleeves: unknown[]; memory: unknown[] }[] }; errors?: unknown };
    expect(body.errors).toBeUndefined();
    expect(body.data.stacks).toHaveLength(100);
    expect(body.data.stacks.every((s) => s.sleeves.length === 2 && s.memory.length === 1)).toBe(true);
    const queries = p.db.statementCount() - before;
    expect(queries).toBeGreaterThan(0);
    expect(queries).toBeLessThanOrEqual(12);
  });
});
