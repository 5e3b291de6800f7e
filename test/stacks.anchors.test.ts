// A stack read lists the epoch anchors of the epochs its memory was written in, newest first, in
// REST and GraphQL alike; a stack that wrote nothing (or whose epochs are not folded yet) has none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { startGateway } from '../router/service.ts';
import type { RunningService } from '../lib/service.ts';
import { STACK_ANCHORS } from '../subgraphs/chains/anchors.ts';
import { indexNodesPart } from '../subgraphs/memory/index.ts';
import { runStatement } from '../lib/db/statement.ts';

let p: TestPlatform;
let gw: RunningService;
const hex = (n: number, len = 64) => n.toString(16).padStart(len, '0');
/** Nodes stored as a write's statement stores them (with their stack's write epochs). */
const storeNodes = (nodes: Array<{ cid: string; stackId: string; epoch: number }>) =>
  runStatement(p.db, [indexNodesPart(nodes.map((n) => ({ ...n, links: [], data: 'x' })))!]);
const json = async (r: Response) => ({ status: r.status, body: (await r.json()) as any });
const post = (path: string, body: unknown) =>
  fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(json);

beforeAll(async () => {
  p = await testPlatform({ GATEWAY_PORT: '0', COG_RATE_LIMIT_PER_MIN: '0' });
  gw = await startGateway(p);
});
afterAll(async () => {
  await gw?.close();
  await p?.cleanup();
});

describe('stack anchors', () => {
  it('are the folded epochs the stack wrote in, newest first, with the tuple and its commitment', async () => {
    const a = (await post('/v1/stacks', { name: 'writer' })).body;
    const b = (await post('/v1/stacks', { name: 'quiet' })).body;
    expect(a.anchors).toEqual([]);
    const node = (epoch: number, i: number) => ({ cid: `cog://${hex(epoch * 100 + i)}@${epoch}`, stackId: a.id, epoch });
    // Two writes in epoch 3, one in 5, one in 7 (not folded yet); epoch 4 folded without any.
    await storeNodes([node(3, 1), node(3, 2), node(5, 1), node(7, 1)]);
    const anchor = (epoch: number) => ({
      epoch,
      crossRoot: hex(epoch + 1000),
      evmRoot: hex(1),
      ipfsRoot: hex(epoch + 2000),
      sleevesRoot: hex(2),
      btcRoot: hex(0),
      gaps: [],
    });
    await p.db.prisma.epochAnchor.createMany({ data: [anchor(3), anchor(4), anchor(5)] });
    await p.db.prisma.epochAnchor.update({ where: { epoch: 5 }, data: { blockHash: hex(55), blockHeight: 6, chainStatus: 'confirmed' } });

    const read = await json(await fetch(`${gw.url}/v1/stacks/${a.id}`));
    expect(read.status).toBe(200);
    expect(read.body.anchors).toEqual([
      { epoch: 5, crossRoot: hex(1005), ipfsRoot: hex(2005), blockHash: hex(55), blockHeight: 6, chainStatus: 'confirmed' },
      { epoch: 3, crossRoot: hex(1003), ipfsRoot: hex(2003), blockHash: null, blockHeight: null, chainStatus: 'pending' },
    ]);
    expect((await json(await fetch(`${gw.url}/v1/stacks/${b.id}`))).body.anchors).toEqual([]);
    const list = (await json(await fetch(`${gw.url}/v1/stacks`))).body as Array<{ id: string; anchors: Array<{ epoch: number }> }>;
    expect(list.find((s) => s.id === a.id)!.anchors.map((x) => x.epoch)).toEqual([5, 3]);

    const gql = await post('/graphql', { query: '{ stacks { id anchors { epoch crossRoot ipfsRoot blockHash blockHeight chainStatus } } }' });
    expect(gql.body.errors).toBeUndefined();
    const byId = new Map((gql.body.data.stacks as Array<{ id: string; anchors: unknown[] }>).map((s) => [s.id, s.anchors]));
    expect(byId.get(a.id)).toEqual(read.body.anchors);
    expect(byId.get(b.id)).toEqual([]);
  });

  it('keeps the newest when a stack wrote in more epochs than a read lists', async () => {
    const c = (await post('/v1/stacks', { name: 'busy' })).body;
    const n = STACK_ANCHORS + 8;
    await storeNodes(Array.from({ length: n }, (_, i) => ({ cid: `cog://${hex(900_000 + i)}@${100 + i}`, stackId: c.id, epoch: 100 + i })));
    await p.db.prisma.epochAnchor.createMany({
      data: Array.from({ length: n }, (_, i) => ({
        epoch: 100 + i,
        crossRoot: hex(i),
        evmRoot: hex(1),
        ipfsRoot: hex(i),
        sleevesRoot: hex(2),
        btcRoot: hex(0),
        gaps: [],
      })),
    });
    const read = (await json(await fetch(`${gw.url}/v1/stacks/${c.id}`))).body;
    expect(read.anchors).toHaveLength(STACK_ANCHORS);
    expect(read.anchors[0].epoch).toBe(100 + n - 1);
    expect(read.anchors.at(-1).epoch).toBe(100 + n - STACK_ANCHORS);
  });
});
