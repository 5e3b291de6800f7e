// The Cortex service end to end: an embedded anvil child (state under the data dir), the suite
// deployed once, and a stack created through the REST API whose identity NFT answers ownerOf once
// the block lands; after a restart the same suite and state are back, nothing is re-deployed.
import { afterAll, beforeAll, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { Contract, getAddress } from 'ethers';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { stackRow } from './helpers/stack-rows.ts';
import { createHttp } from '../lib/http.ts';
import stacksRest from '../compat-rest/stacks.ts';
import { startCortexWith } from '../subgraphs/chains/cortex/service.ts';
import { cortexAnvilOptions, rpc, startAnvilEarly, takeEarlyAnvil } from '../subgraphs/chains/cortex/anvil.ts';
import { prestartCortex } from '../subgraphs/chains/index.ts';
import { artifact } from '../subgraphs/chains/cortex/artifacts.ts';
import { stackAddress } from '../lib/address.ts';
import { outboxStatus } from '../subgraphs/chains/cortex/submitter.ts';
import { reconcileChain } from '../subgraphs/chains/cortex/reconcile.ts';
import { enqueueChainTx } from '../subgraphs/chains/outbox.ts';
import { setEpisodicHead } from '../subgraphs/stacks/stacks.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform({ CORTEX_PORT: '0', COG_CORTEX_BLOCK_TIME: '1' });
});
afterAll(async () => {
  await p?.cleanup();
});

async function until<T>(fn: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

it('creates a stack over REST; its NFT lands on the embedded Cortex and survives a restart', async () => {
  let cortex = await startCortexWith(p, { submitter: { pollMs: 50 } });
  const app = createHttp({ name: 'test', log: p.log });
  await app.register(stacksRest, { platform: p });
  try {
    expect(cortex.anvil).toBeDefined();
    expect(cortex.chain.chainId).toBe(131072);
    const file = path.join(p.config.dataDir, 'deployments', '131072.json');
    const deployed = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(deployed.contracts).toEqual(cortex.suite.contracts);
    expect(p.local.get('cortex')).toBeDefined();

    const res = await app.inject({ method: 'POST', url: '/v1/stacks', payload: { name: 'alice' } });
    expect(res.statusCode).toBe(201);
    const stack = res.json() as { id: string; tokenId: number; pubKey: string };
    // The REST call returned before the block: the chain side is pending, then confirmed.
    expect((await p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } })).chainStatus).toBe('pending');
    const identity = new Contract(cortex.suite.contracts.StackIdentity, artifact('StackIdentity').abi, cortex.chain.provider);
    const owner = await until(() => identity.ownerOf(stack.tokenId) as Promise<string>);
    expect(owner).toBe(getAddress(stackAddress(stack.pubKey)));
    expect((await identity.stackOf(stack.tokenId)).stackId).toBe(stack.id);
    await until(async () => ((await p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } })).chainStatus === 'confirmed' ? true : undefined));

    // Restart: anvil writes its state on exit and loads it again; the deployment is kept. This time
    // anvil is started ahead, as the launcher does (prestartCortex), and Cortex takes that one.
    const suite = cortex.suite.contracts;
    await cortex.close();
    await prestartCortex(p.config);
    cortex = await startCortexWith(p, { submitter: { pollMs: 50 } });
    expect(takeEarlyAnvil(cortexAnvilOptions(p.config))).toBeUndefined();
    expect(cortex.suite.contracts).toEqual(suite);
    const identity2 = new Contract(cortex.suite.contracts.StackIdentity, artifact('StackIdentity').abi, cortex.chain.provider);
    expect(await identity2.ownerOf(stack.tokenId)).toBe(owner);
    const res2 = await app.inject({ method: 'POST', url: '/v1/stacks', payload: { name: 'bob', kind: 'ai' } });
    const bob = res2.json() as { tokenId: number; pubKey: string };
    expect(bob.tokenId).toBe(stack.tokenId + 1);
    expect(await until(() => identity2.ownerOf(bob.tokenId) as Promise<string>)).toBe(getAddress(stackAddress(bob.pubKey)));
    await cortex.submitter.idle(15_000);
    expect(await outboxStatus(p.db.prisma)).toMatchObject({ pending: 0, submitted: 0, failed: 0 });
  } finally {
    await app.close();
    await cortex.close();
  }
});

it('hands the anvil started ahead to the start with the same options, once', async () => {
  const o = { ...cortexAnvilOptions(p.config), statePath: path.join(p.config.dataDir, 'early-anvil', 'state.json') };
  startAnvilEarly(o);
  expect(takeEarlyAnvil({ ...o, blockTime: 7 })).toBeUndefined();
  const early = takeEarlyAnvil(o);
  expect(early).toBeDefined();
  expect(takeEarlyAnvil(o)).toBeUndefined();
  const anvil = await early!;
  try {
    expect(Number(await rpc<string>(anvil.url, 'eth_chainId'))).toBe(131072);
  } finally {
    await anvil.close();
  }
});

it('after a hard kill loses blocks, the restart re-sends the lost transactions (same bytes)', async () => {
  // No periodic state dump: only a graceful exit writes the state, so a kill -9 loses blocks.
  const opts = { submitter: { pollMs: 50 }, anvil: { stateInterval: 3600 } };
  let cortex = await startCortexWith(p, opts);
  const app = createHttp({ name: 'test', log: p.log });
  await app.register(stacksRest, { platform: p });
  try {
    const carol = (await app.inject({ method: 'POST', url: '/v1/stacks', payload: { name: 'carol' } })).json() as {
      id: string;
      tokenId: number;
      pubKey: string;
    };
    // Two ledger rows for carol (no epoch: settled at once), carried by one settlement.
    for (const [kind, milli] of [
      ['mint', '7000'],
      ['burn', '2500'],
    ] as const)
      await p.db.prisma.$transaction((tx) =>
        enqueueChainTx(tx, { kind, ref: `ledger:${kind}:carol`, payload: { stackId: carol.id, amounts: [{ token: 'sync', milli }] } }),
      );
    await cortex.submitter.idle(15_000);
    const row = await p.db.prisma.chainOutbox.findFirstOrThrow({ where: { kind: 'mintIdentity', ref: carol.id } });
    expect(row.status).toBe('confirmed');
    const settle = await p.db.prisma.chainOutbox.findFirstOrThrow({ where: { kind: 'settle' }, orderBy: { id: 'desc' } });
    expect(settle.status).toBe('confirmed');
    const bandwidth = () => new Contract(cortex.suite.contracts.BandwidthToken, artifact('BandwidthToken').abi, cortex.chain.provider);
    expect(Number(await bandwidth().balanceOf(carol.tokenId, 2))).toBe(4500);
    process.kill(-cortex.anvil!.child.pid!, 'SIGKILL');
    await cortex.close();

    cortex = await startCortexWith(p, opts);
    // The identity and the settlement had their blocks lost; the settlement's two ledger rows follow it.
    expect(cortex.rewound).toBe(2);
    expect((await p.db.prisma.chainOutbox.findUniqueOrThrow({ where: { id: settle.id } })).status).toBe('submitted');
    expect((await p.db.prisma.chainLedgerIntent.findMany({ where: { settlementId: settle.id } })).map((r) => r.status)).toEqual(['settled', 'settled']);
    expect(await outboxStatus(p.db.prisma)).toMatchObject({ submitted: 2 + 2 });
    expect((await p.db.prisma.stack.findUniqueOrThrow({ where: { id: carol.id } })).chainStatus).toBe('pending');
    const identity = new Contract(cortex.suite.contracts.StackIdentity, artifact('StackIdentity').abi, cortex.chain.provider);
    expect(await until(() => identity.ownerOf(carol.tokenId) as Promise<string>)).toBe(getAddress(stackAddress(carol.pubKey)));
    await cortex.submitter.idle(15_000);
    const again = await p.db.prisma.chainOutbox.findFirstOrThrow({ where: { id: row.id } });
    expect([again.status, again.txHash, again.nonce]).toEqual(['confirmed', row.txHash, row.nonce]);
    // The settlement went again as the same bytes and applied once.
    const settled = await p.db.prisma.chainOutbox.findUniqueOrThrow({ where: { id: settle.id } });
    expect([settled.status, settled.txHash, settled.nonce]).toEqual(['confirmed', settle.txHash, settle.nonce]);
    expect(Number(await bandwidth().balanceOf(carol.tokenId, 2))).toBe(4500);
    expect(await reconcileChain(p.db.prisma, cortex.chain)).toEqual([]);
    expect((await p.db.prisma.stack.findUniqueOrThrow({ where: { id: carol.id } })).chainStatus).toBe('confirmed');
  } finally {
    await app.close();
    await cortex.close();
  }
});

it('mirrors the moved heads of many stacks in one updateStacks call an epoch; a stack is confirmed once its NFT holds its head', async () => {
  const cortex = await startCortexWith(p, { submitter: { pollMs: 50 } });
  const app = createHttp({ name: 'test', log: p.log });
  await app.register(stacksRest, { platform: p });
  try {
    const made = [];
    for (const name of ['dora', 'eve', 'finn'])
      made.push((await app.inject({ method: 'POST', url: '/v1/stacks', payload: { name } })).json() as { id: string; tokenId: number });
    await cortex.submitter.idle(15_000);
    const epoch = p.epochs.current();
    const head = (i: number, n: number) => `cog://${String(i).repeat(63)}${n}@${epoch}`;
    // A stack with no identity token and none on its way (inserted as the scale bench's fixtures are).
    const bare = await p.db.prisma.stack.create({ data: { ...stackRow(0), id: 'stack:bare', name: 'bare', pubKey: 'bare' } });
    await p.db.prisma.$transaction((tx) => setEpisodicHead(tx, bare.id, head(9, 1)));
    // Two moves of each head in the epoch: no outbox row for any of them, the records go pending.
    for (const n of [1, 2]) for (const [i, s] of made.entries()) await p.db.prisma.$transaction((tx) => setEpisodicHead(tx, s.id, head(i + 1, n), { epoch }));
    expect(await p.db.prisma.chainOutbox.count({ where: { kind: { in: ['updateStack', 'updateStacks'] } } })).toBe(0);
    for (const s of made) expect((await p.db.prisma.stack.findUniqueOrThrow({ where: { id: s.id } })).chainStatus).toBe('pending');
    // The next epoch's first round queues the three heads as one call.
    p.setEpoch(epoch + 1);
    const identity = new Contract(cortex.suite.contracts.StackIdentity, artifact('StackIdentity').abi, cortex.chain.provider);
    for (const [i, s] of made.entries()) await until(async () => ((await identity.stackOf(s.tokenId))[2] === head(i + 1, 2) ? true : undefined));
    const calls = await p.db.prisma.chainOutbox.findMany({ where: { kind: 'updateStacks' } });
    expect(calls).toHaveLength(1);
    expect((calls[0]!.payload as { heads: Array<{ stackId: string }> }).heads.map((h) => h.stackId).sort()).toEqual([...made.map((s) => s.id), bare.id].sort());
    for (const [i, s] of made.entries()) {
      const row = await until(async () => {
        const r = await p.db.prisma.stack.findUniqueOrThrow({ where: { id: s.id } });
        return r.chainStatus === 'confirmed' ? r : undefined;
      });
      expect(row.mirroredHead).toBe(head(i + 1, 2));
      expect(Number((await identity.stackOf(s.tokenId))[1])).toBe(epoch);
    }
    // The chain skipped the bare stack's head (no token); with no mint on its way it is not sent again.
    const b = await until(async () => {
      const r = await p.db.prisma.stack.findUniqueOrThrow({ where: { id: bare.id } });
      return r.mirroredHead ? r : undefined;
    });
    expect([b.mirroredHead, b.chainStatus]).toEqual([head(9, 1), 'pending']);
    // Nothing moved since: the next epoch queues nothing.
    p.setEpoch(epoch + 2);
    await cortex.submitter.tick();
    expect(await p.db.prisma.chainOutbox.count({ where: { kind: 'updateStacks' } })).toBe(1);
    expect(await reconcileChain(p.db.prisma, cortex.chain)).toEqual([]);
  } finally {
    await app.close();
    await cortex.close();
  }
});
