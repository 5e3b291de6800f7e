// Every entity and reference field the federation added is batched: a query for many stacks with
// sleeves (tokens, residues), balances, claimable, emissions, residues, memory and heads takes a
// bounded number of database queries, the same for 10 stacks as for 40.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { stackRow } from './helpers/stack-rows.ts';
import { startGateway } from '../router/service.ts';
import type { RunningService } from '../lib/service.ts';
import { openAccrual } from '../subgraphs/economy/index.ts';

let p: TestPlatform;
let gw: RunningService;
const N = 40;

beforeAll(async () => {
  p = await testPlatform({ GATEWAY_PORT: '0', COG_GRAPHQL_MAX_COST: '1000000' });
  gw = await startGateway(p);
  const stacks = Array.from({ length: N }, (_, i) => ({ ...stackRow(i), episodicHead: `cog://${i.toString(16).padStart(64, '0')}@0` }));
  await p.db.prisma.stack.createMany({ data: stacks });
  // Their accrual rows, as createStack opens them (created, so last active, in epoch 0).
  const terms = { cpv: { syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1, residueCoeff: 1, routingCoeff: 1 }, binding: { floor: 0.25, decayRate: 0.05 } };
  await p.db.prisma.$transaction(async (tx) => {
    for (const s of stacks) await openAccrual(tx, s.id, 0, terms);
  });
  const sleeveId = (i: number, j: number) => `sleeve:ai:${i * 2 + j + 1}:${(i * 2 + j).toString(16).padStart(8, '0')}`;
  await p.db.prisma.sleeve.createMany({
    data: stacks.flatMap((s, i) =>
      [0, 1].map((j) => ({ id: sleeveId(i, j), stackId: s.id, embodimentType: 'ai', shape: 'A', tickRate: 2000, alive: j === 0 })),
    ),
  });
  await p.db.prisma.memoryNode.createMany({
    data: stacks.map((s, i) => ({ cid: `cog://${i.toString(16).padStart(64, '0')}@0`, stackId: s.id, epoch: 0, links: [], size: 1 })),
  });
  p.setEpoch(1); // one epoch of (computed) emission each
  await p.db.prisma.residue.createMany({
    data: stacks.map((s, i) => ({
      id: `residue:stale-ordering:${i}`,
      kind: 'stale-ordering',
      trigger: 't',
      bountyMilli: 2000,
      status: 'open',
      stackId: s.id,
      sleeveId: sleeveId(i, 0),
      epoch: 0,
      expiresAtEpoch: 100,
      evidence: {},
      dedupeKey: `d${i}`,
    })),
  });
});
afterAll(async () => {
  await gw?.close();
  await p?.cleanup();
});

const query = (first: number) => `{ stacks(first: ${first}) {
  id head { cid pinned stack { name } }
  sleeves { id tokens { compute } residues { id stack { name } sleeve { alive } } }
  balances { compute } claimable { compute } emissions { id stack { id } } residues { id } memory(first: 2) { cid linked { cid } }
} }`;

async function countQueries(first: number): Promise<number> {
  const before = p.db.statementCount();
  const r = await fetch(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: query(first) }),
  });
  const body = (await r.json()) as {
    data: { stacks: { sleeves: { residues: unknown[] }[]; emissions: unknown[]; head: { pinned: boolean } }[] };
    errors?: unknown;
  };
  expect(body.errors).toBeUndefined();
  expect(body.data.stacks).toHaveLength(first);
  expect(
    body.data.stacks.every((s) => s.sleeves.length === 2 && s.sleeves[0]!.residues.length === 1 && s.emissions.length === 1 && s.head.pinned === false),
  ).toBe(true);
  return p.db.statementCount() - before;
}

describe('DataLoader across the new fields', () => {
  it('makes the same bounded number of queries for 10 and for 40 stacks', async () => {
    const few = await countQueries(10);
    const many = await countQueries(N);
    expect(many).toBe(few);
    expect(many).toBeLessThanOrEqual(16);
  });
});
