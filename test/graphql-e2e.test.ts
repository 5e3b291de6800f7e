// GraphQL end to end through the router (@apollo/gateway over the six subgraphs, embedded): a query
// spanning all six subgraphs, every mutation, and refusals carrying the problem+json codes in
// extensions.code. One platform: Hippocampus in-process, a Medulla node and the Needlecast Router
// on port 0, the gateway on port 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as ed from '@noble/ed25519';
import { randomBytes } from 'node:crypto';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import type { RunningService } from '../lib/service.ts';
import { toHex } from '../lib/crypto.ts';
import { startGateway } from '../router/service.ts';
import { localHippocampus } from '../subgraphs/memory/hippocampus/client.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { needlecastStarter } from '../subgraphs/sleeves/needlecast/service.ts';
import { balanceOf, burn, sleeveAccount } from '../subgraphs/economy/ledger.ts';
import { openResidueNow } from '../subgraphs/residues/open.ts';

let p: TestPlatform;
let gw: RunningService;
let medulla: MedullaService;
let router: RunningService;

beforeAll(async () => {
  p = await testPlatform({ GATEWAY_PORT: '0', NEEDLECAST_PORT: '0' });
  p.ports.hippocampus = localHippocampus(p);
  medulla = await createMedulla(p, { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 1, node: 'gql-e2e' });
  p.config.urls.medulla = medulla.url;
  router = await needlecastStarter()(p);
  p.config.urls.needlecast = router.url!;
  gw = await startGateway(p);
});
afterAll(async () => {
  await gw?.close();
  await router?.close();
  await medulla?.close();
  await p?.cleanup();
});

interface GqlError {
  message: string;
  extensions?: Record<string, unknown> & { code?: string };
}
type Data = Record<string, any>;

async function gql(query: string, variables: Record<string, unknown> = {}): Promise<{ data?: Data; errors?: GqlError[] }> {
  const r = await fetch(`${gw.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  return (await r.json()) as { data?: Data; errors?: GqlError[] };
}
async function ok(query: string, variables: Record<string, unknown> = {}): Promise<Data> {
  const r = await gql(query, variables);
  expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
  return r.data!;
}
/** The first error's code (and the error), for a refused operation. */
async function refused(query: string, variables: Record<string, unknown> = {}): Promise<GqlError> {
  const r = await gql(query, variables);
  expect(r.errors?.length, JSON.stringify(r)).toBeGreaterThan(0);
  return r.errors![0]!;
}

const S: { stack?: string; stackB?: string; ai?: string; mem?: string; human?: string; cids: string[] } = { cids: [] };

describe('GraphQL mutations through the router', () => {
  it('createStack: Shape A returns identityPriv once, Shape B a stack:0x id; 400 and 409 refusals', async () => {
    const a = await ok(
      'mutation($i: CreateStackInput) { createStack(input: $i) { identityPriv stack { id tokenId name kind pubKey pubkey epoch cpv { syncCoeff } anchors { epoch } } } }',
      { i: { name: 'gql-e2e' } },
    );
    expect(a.createStack.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    expect(a.createStack.stack).toMatchObject({ name: 'gql-e2e', kind: 'human', epoch: 0, cpv: { syncCoeff: 1 }, anchors: [] });
    expect(a.createStack.stack.pubkey).toBe(a.createStack.stack.pubKey);
    S.stack = a.createStack.stack.id;
    expect(S.stack).toMatch(/^stack:human:\d+:[0-9a-f]{12}$/);

    const pubkey = toHex(await ed.getPublicKeyAsync(randomBytes(32)));
    const cpv = { syncCoeff: 1, memoryCoeff: 0.5, computeCoeff: 2, residueCoeff: 1, routingCoeff: 1 };
    const b = await ok('mutation($i: CreateStackInput) { createStack(input: $i) { identityPriv stack { id cpv { computeCoeff } } } }', { i: { pubkey, cpv } });
    expect(b.createStack.identityPriv).toBeNull();
    expect(b.createStack.stack.id).toMatch(/^stack:0x[0-9a-f]{40}$/);
    S.stackB = b.createStack.stack.id;

    const dup = await refused('mutation($i: CreateStackInput) { createStack(input: $i) { stack { id } } }', { i: { pubkey, cpv } });
    expect(dup.extensions).toMatchObject({ code: 'STACK_EXISTS', status: 409 });
    const badCpv = await refused('mutation($i: CreateStackInput) { createStack(input: $i) { stack { id } } }', {
      i: { pubkey: toHex(await ed.getPublicKeyAsync(randomBytes(32))), cpv: { ...cpv, syncCoeff: 3 } },
    });
    expect(badCpv.extensions).toMatchObject({ code: 'BAD_REQUEST', status: 400, errors: [{ path: 'cpv.syncCoeff' }] });
    expect((await refused('mutation { createStack(input: { name: "" }) { stack { id } } }')).extensions?.code).toBe('BAD_REQUEST');
  });

  it('spawnSleeve in both shapes; NOT_FOUND for an unknown stack, BAD_REQUEST for an unknown kind', async () => {
    const a = await ok(
      'mutation($s: ID!) { spawnSleeve(stackId: $s, embodimentType: "ai") { id kind embodimentType alive drift tokens { sync compute residue } stack { name } } }',
      { s: S.stack },
    );
    expect(a.spawnSleeve).toMatchObject({ kind: 'ai', alive: true, drift: 0, tokens: { sync: 250, compute: 250, residue: 0 }, stack: { name: 'gql-e2e' } });
    S.ai = a.spawnSleeve.id;
    const b = await ok('mutation($s: ID!) { spawnSleeve(stackId: $s, kind: "memory", tickRate: 4000) { id kind tickRate tokens { memory } } }', { s: S.stack });
    expect(b.spawnSleeve).toMatchObject({ kind: 'memory', tickRate: 4000, tokens: { memory: 1000 } });
    S.mem = b.spawnSleeve.id;
    expect((await refused('mutation { spawnSleeve(stackId: "stack:nope", embodimentType: "ai") { id } }')).extensions).toMatchObject({
      code: 'NOT_FOUND',
      status: 404,
    });
    expect((await refused('mutation($s: ID!) { spawnSleeve(stackId: $s, embodimentType: "robot") { id } }', { s: S.stack })).extensions?.code).toBe(
      'BAD_REQUEST',
    );
  });

  it('perceive, remember (pinned head) and recall', async () => {
    for (const text of ['first light', 'second thought']) {
      const r = await ok(
        'mutation($id: ID!, $t: String!) { perceive(sleeveId: $id, text: $t) { cid epoch thought cost { compute } node { cid stackId pinned } sleeve { drift } } }',
        { id: S.ai, t: text },
      );
      expect(r.perceive.thought).toBe(`ai@${S.ai!.slice(-6)} ${text}`);
      expect(r.perceive.cost).toEqual({ compute: 0.5 });
      expect(r.perceive.node).toMatchObject({ cid: r.perceive.cid, stackId: S.stack, pinned: false });
      S.cids.unshift(r.perceive.cid);
    }
    const shapeB = await ok('mutation($id: ID!, $s: ID) { perceive(sleeveId: $id, stackId: $s, text: "shape b") { cid epoch } }', { id: S.ai, s: S.stack });
    S.cids.unshift(shapeB.perceive.cid);
    const rem = await ok('mutation($s: ID) { remember(stackId: $s, text: "keep this", pin: true) { cid sleeveId node { pinned kind } } }', { s: S.stack });
    expect(rem.remember.node).toEqual({ pinned: true, kind: 'remember' });
    expect(rem.remember.sleeveId).toBe(S.mem); // the stack form: the richest memory sleeve writes
    S.cids.unshift(rem.remember.cid);

    const r = await ok(
      'mutation($s: ID!) { recall(stackId: $s, depth: 10) { fragments { text node { cid } } broken brokenCount fidelity cost { memory } effectiveDepth sleeveId residue { id } } }',
      { s: S.stack },
    );
    expect(r.recall.fragments.map((f: { text: string }) => f.text)).toEqual(['keep this', 'shape b', 'second thought', 'first light']);
    expect(r.recall.fragments[0].node.cid).toBe(S.cids[0]);
    expect(r.recall).toMatchObject({ broken: [], brokenCount: 0, fidelity: 1, cost: { memory: 4 }, sleeveId: S.mem, residue: null });
    const shallow = await ok(
      'mutation($s: ID!, $sl: ID) { recall(stackId: $s, depth: 10, sleeveId: $sl, memoryToken: 2) { effectiveDepth fragments { text } } }',
      { s: S.stack, sl: S.ai },
    );
    expect(shallow.recall).toMatchObject({ effectiveDepth: 2, fragments: [{ text: 'keep this' }, { text: 'shape b' }] });
    expect((await refused('mutation($s: ID!) { recall(stackId: $s, depth: 0) { fidelity } }', { s: S.stack })).extensions?.code).toBe('BAD_REQUEST');
    expect((await refused('mutation($id: ID!) { perceive(sleeveId: $id, stackId: "stack:other", text: "x") { cid } }', { id: S.ai })).extensions?.code).toBe(
      'NOT_FOUND',
    );
    expect((await refused('mutation { remember(text: "x") { cid } }', {})).extensions).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
  });

  it('syncSleeve resets drift; INSUFFICIENT_TOKENS (402) with token, required, available when short', async () => {
    const s = await ok('mutation($id: ID!) { syncSleeve(id: $id) { ok epoch sleeve { drift syncEpoch tokens { sync } } } }', { id: S.mem });
    expect(s.syncSleeve).toMatchObject({ ok: true, epoch: 0, sleeve: { drift: 0, tokens: { sync: 499 } } });
    const held = await balanceOf(p.db.prisma, sleeveAccount(S.mem!));
    await p.db.prisma.$transaction((tx) =>
      burn(tx, sleeveAccount(S.mem!), [{ token: 'sync', milli: BigInt(Math.round(held.sync * 1000)) }], { reason: 'test', epoch: 0, stackId: S.stack! }),
    );
    const e = await refused('mutation($id: ID!) { syncSleeve(id: $id) { ok } }', { id: S.mem });
    expect(e.extensions).toMatchObject({ code: 'INSUFFICIENT_TOKENS', status: 402, token: 'sync', required: 1, available: 0 });
  });

  it('faucetDrip grants to the alive sleeves; RATE_LIMITED (429) inside the cooldown; claimEmissions moves accrued emission', async () => {
    const d = await ok('mutation($s: ID!) { faucetDrip(stackId: $s) { ok granted { compute routing } sleeves } }', { s: S.stack });
    expect(d.faucetDrip).toEqual({ ok: true, granted: { compute: 100, routing: 100 }, sleeves: [S.ai, S.mem].sort() });
    const again = await refused('mutation($s: ID!) { faucetDrip(stackId: $s) { ok } }', { s: S.stack });
    expect(again.extensions).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(again.extensions?.retryAfter).toBeGreaterThan(0);
    expect((await refused('mutation { faucetDrip(stackId: "stack:nope") { ok } }')).extensions?.code).toBe('NOT_FOUND');

    p.setEpoch(1); // epoch 1's emission accrues as it begins
    const before = await ok('query($s: ID!) { stack(id: $s) { claimable { compute } emissions { id epoch amounts { compute } stack { name } } } }', {
      s: S.stack,
    });
    expect(before.stack.claimable.compute).toBeGreaterThan(0);
    expect(before.stack.emissions).toMatchObject([{ epoch: 1, stack: { name: 'gql-e2e' } }]);
    const c = await ok('mutation($s: ID!) { claimEmissions(stackId: $s) { stackId claimable { compute } stack { claimable { compute } } } }', { s: S.stack });
    expect(c.claimEmissions.claimable.compute).toBe(before.stack.claimable.compute);
    expect(c.claimEmissions.stack.claimable.compute).toBe(0);
    expect((await refused('mutation { claimEmissions(stackId: "stack:nope") { stackId } }')).extensions?.code).toBe('NOT_FOUND');
  });

  it('needlecast runs the saga through the router; its refusals keep the router codes', async () => {
    const n = await ok(
      `mutation($i: NeedlecastInput!) { needlecast(input: $i) {
      ok sagaId status route shards from to cost { routing } shardsTransferred
      saga { id status route shards fromSleeve { alive } toSleeve { id kind alive drift } stack { name } } } }`,
      { i: { from: S.ai, to: 'human' } },
    );
    const r = n.needlecast;
    expect(r).toMatchObject({ ok: true, status: 'completed', shards: 4, shardsTransferred: 4, from: S.ai });
    expect(r.sagaId).toMatch(/^needle:[0-9a-f]+$/);
    expect(r.route).toMatch(/^[0-9a-f]{64}$/);
    expect(r.cost.routing).toBeCloseTo(5.4);
    expect(r.saga).toMatchObject({
      id: r.sagaId,
      route: ['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle'],
      fromSleeve: { alive: false },
      toSleeve: { kind: 'human', alive: true, drift: 0 },
      stack: { name: 'gql-e2e' },
    });
    S.human = r.saga.toSleeve.id;
    const q = await ok('query($id: ID!) { saga(id: $id) { status to toKind steps { name status } } }', { id: r.sagaId });
    expect(q.saga.steps.every((s: { status: string }) => s.status === 'done')).toBe(true);
    expect((await ok('{ saga(id: "needle:0000000000000000") { id } }')).saga).toBeNull();

    const gone = await refused('mutation($i: NeedlecastInput!) { needlecast(input: $i) { ok } }', { i: { from: S.ai, to: 'human' } });
    expect(gone.extensions).toMatchObject({ code: 'SLEEVE_DECOMMISSIONED', status: 409 });
    const missing = await refused('mutation { needlecast(input: { fromSleeveId: "sleeve:x" }) { ok } }');
    expect(missing.extensions).toMatchObject({ code: 'BAD_REQUEST', errors: [{ path: 'stackId' }, { path: 'toSleeveKind' }] });
    expect((await refused('mutation { needlecast(input: { from: "sleeve:nope", to: "ai" }) { ok } }')).extensions?.code).toBe('NOT_FOUND');
  });

  it('decommissionSleeve; a second one and a perceive on it are SLEEVE_DECOMMISSIONED (409)', async () => {
    const spare = (await ok('mutation($s: ID!) { spawnSleeve(stackId: $s, embodimentType: "mining") { id } }', { s: S.stack })).spawnSleeve.id;
    const d = await ok('mutation($id: ID!) { decommissionSleeve(id: $id) { alive tokens { compute } } }', { id: spare });
    expect(d.decommissionSleeve).toEqual({ alive: false, tokens: { compute: 250 } }); // the decommission-time snapshot
    expect((await refused('mutation($id: ID!) { decommissionSleeve(id: $id) { alive } }', { id: spare })).extensions).toMatchObject({
      code: 'SLEEVE_DECOMMISSIONED',
      status: 409,
    });
    expect((await refused('mutation($id: ID!) { perceive(sleeveId: $id, text: "x") { cid } }', { id: spare })).extensions?.code).toBe('SLEEVE_DECOMMISSIONED');
    expect((await refused('mutation { decommissionSleeve(id: "sleeve:nope") { alive } }')).extensions?.code).toBe('NOT_FOUND');
  });

  it('submitResidueProof: the first valid proof wins; INVALID_PROOF (422), RESIDUE_NOT_OPEN (409), NOT_FOUND', async () => {
    const open = (cid: string) =>
      openResidueNow(p.db.prisma, {
        kind: 'shard-loss',
        trigger: 'test',
        stackId: S.stack,
        epoch: 0,
        evidence: { cid },
        dedupeKey: `test:${cid}`,
        expiryEpochs: 100,
      });
    const good = (await open(S.cids[0]!)).residue;
    const bad = (await open('cog://' + 'f'.repeat(64) + '@0')).residue;
    const invalid = await refused('mutation($id: ID!, $c: ID!) { submitResidueProof(id: $id, claimant: $c, proof: {}) { status } }', {
      id: bad.id,
      c: S.stackB,
    });
    expect(invalid.extensions).toMatchObject({ code: 'INVALID_PROOF', status: 422 });
    const won = await ok(
      'mutation($id: ID!, $c: ID!) { submitResidueProof(id: $id, claimant: $c, proof: { note: "readable again" }) { id status claimant claimantStack { id } bounty } }',
      { id: good.id, c: S.stackB },
    );
    expect(won.submitResidueProof).toMatchObject({ status: 'resolved', claimant: S.stackB, claimantStack: { id: S.stackB }, bounty: 15 });
    expect(
      (await refused('mutation($id: ID!, $c: ID!) { submitResidueProof(id: $id, claimant: $c) { status } }', { id: good.id, c: S.stackB })).extensions,
    ).toMatchObject({ code: 'RESIDUE_NOT_OPEN', status: 409 });
    expect((await refused('mutation($c: ID!) { submitResidueProof(id: "residue:nope", claimant: $c) { status } }', { c: S.stackB })).extensions?.code).toBe(
      'NOT_FOUND',
    );
    expect((await refused('mutation($id: ID!) { submitResidueProof(id: $id, claimant: "stack:nope") { status } }', { id: bad.id })).extensions?.code).toBe(
      'NOT_FOUND',
    );
    const b = await ok('query($s: ID!) { balances(stackId: $s) { raw { residue } effective { residue } ebcFactor currentEpoch } }', { s: S.stackB });
    expect(b.balances.raw.residue).toBe(15);
  });

  it('mineBlock mines on Medulla; block(height) reads it back, previous links, null past the tip', async () => {
    const m = await ok('mutation { mineBlock { height blockHash epoch difficulty ts crossRoot synapticFieldRoot } }');
    expect(m.mineBlock.height).toBe(1);
    expect(m.mineBlock.blockHash).toMatch(/^[0-9a-f]{64}$/);
    const b = await ok(
      '{ block(height: 1) { blockHash previous { height previous { height } } } none: block(height: 999) { height } currentEpoch { height tip difficulty block { height } } }',
    );
    expect(b.block).toEqual({ blockHash: m.mineBlock.blockHash, previous: { height: 0, previous: null } });
    expect(b.none).toBeNull();
    expect(b.currentEpoch).toMatchObject({ height: 1, tip: m.mineBlock.blockHash, block: { height: 1 } });
    expect((await refused('{ block(height: -1) { height } }')).extensions?.code).toBe('BAD_REQUEST');
  });

  it('recall below the fidelity minimum opens a residue, reachable from the result', async () => {
    // The needlecast pinned every earlier node: three fresh unpinned ones, gated once the epoch moves on.
    for (const t of ['later 1', 'later 2', 'later 3']) {
      S.cids.unshift((await ok('mutation($id: ID!, $t: String!) { perceive(sleeveId: $id, text: $t) { cid } }', { id: S.human, t })).perceive.cid);
    }
    p.setEpoch(10);
    const r = await ok('mutation($s: ID!) { recall(stackId: $s, depth: 3) { fidelity brokenCount residue { id kind status stack { name } sleeve { id } } } }', {
      s: S.stack,
    });
    expect(r.recall.fidelity).toBeLessThan(0.6);
    expect(r.recall.residue).toMatchObject({ kind: 'historical-non-canonical', status: 'open', stack: { name: 'gql-e2e' } });
    p.setEpoch(0);
  });
});

describe('GraphQL queries through the router', () => {
  it('one query spans all six subgraphs', async () => {
    const d = await ok(
      `query($s: ID!) {
      stack(id: $s) {
        id name pubkey episodicHead
        head { cid pinned linked { cid } }
        sleeves { id kind alive tokens { compute } residues { kind } }
        balances { compute memory sync routing residue }
        memory(first: 3) { cid stack { id } }
        residues(status: "open") { id kind sleeve { id } }
        claimable { compute }
      }
      currentEpoch { epoch height tip }
      block(height: 0) { height blockHash }
    }`,
      { s: S.stack },
    );
    const s = d.stack;
    expect(s.head.cid).toBe(s.episodicHead);
    expect(s.head).toMatchObject({ pinned: false, linked: [{ cid: S.cids[1] }] });
    expect(s.sleeves.map((x: { kind: string }) => x.kind)).toEqual(['ai', 'memory', 'human', 'mining']);
    expect(s.sleeves.flatMap((x: { residues: { kind: string }[] }) => x.residues.map((r) => r.kind))).toEqual(['historical-non-canonical']);
    const alive = s.sleeves.filter((x: { alive: boolean }) => x.alive);
    expect(s.balances.compute).toBeCloseTo(alive.reduce((t: number, x: { tokens: { compute: number } }) => t + x.tokens.compute, 0));
    expect(s.memory.map((n: { cid: string }) => n.cid)).toEqual(S.cids.slice(0, 3));
    expect(s.memory[0].stack.id).toBe(S.stack);
    expect(s.residues.map((x: { kind: string }) => x.kind)).toContain('historical-non-canonical');
    expect(d.currentEpoch.height).toBe(1);
    expect(d.block).toMatchObject({ height: 0 });
  });

  it('the list and lookup queries of the REST API', async () => {
    await p.db.prisma.$executeRaw`UPDATE "Sleeve" SET "driftMilli" = 20000 WHERE id = ${S.mem}`;
    p.setEpoch(1); // the issuance list is as of now: epoch 1's emission
    const d = await ok(
      `query($s: ID!, $m: ID!, $h: ID!) {
      stacks { id }
      sleeves { id alive }
      sleeve(id: $m) { id stackId identityUrl chainStatus }
      nobody: sleeve(id: "sleeve:nope") { id }
      desync { id stackId drift sleeve { kind } }
      tokenBalances(stackId: $s) { stackId sleeveTotals { compute } }
      balances(stackId: $s) { stackId raw { compute } effective { compute } cpv { syncCoeff } lastActiveEpoch currentEpoch ebcFactor }
      issuance(stackId: $s) { id epoch ebcFactor cpv { computeCoeff } }
      residues(first: 10) { id kind status }
      hippocampusStats { nodes pinned peers }
      reconstruct(stackId: $s, sleeveId: $h, depth: 2) { ok fidelity fragments { text } }
    }`,
      { s: S.stack, m: S.mem, h: S.human },
    );
    expect(d.stacks.map((x: { id: string }) => x.id)).toEqual([S.stack, S.stackB]);
    expect(d.sleeves.every((x: { alive: boolean }) => x.alive)).toBe(true);
    expect(d.sleeve).toMatchObject({ id: S.mem, stackId: S.stack });
    expect(d.nobody).toBeNull();
    expect(d.desync).toEqual([{ id: S.mem, stackId: S.stack, drift: 20, sleeve: { kind: 'memory' } }]);
    expect(d.tokenBalances.stackId).toBe(S.stack);
    expect(d.balances).toMatchObject({ stackId: S.stack, cpv: { syncCoeff: 1 } });
    expect(d.balances.raw.compute).toBeGreaterThanOrEqual(d.tokenBalances.sleeveTotals.compute); // raw adds the pool
    expect(d.issuance).toMatchObject([{ epoch: 1, cpv: { computeCoeff: 1 } }]);
    expect(d.residues.length).toBeGreaterThanOrEqual(3);
    expect(d.hippocampusStats.nodes).toBeGreaterThanOrEqual(7);
    expect(d.hippocampusStats.pinned).toBeGreaterThanOrEqual(1);
    expect(d.reconstruct).toMatchObject({ ok: true, fidelity: 1, fragments: [{ text: 'later 3' }, { text: 'later 2' }] });

    expect((await refused('{ tokenBalances(stackId: "stack:nope") { stackId } }')).extensions?.code).toBe('NOT_FOUND');
    expect((await refused('{ balances(stackId: "stack:nope") { stackId } }')).extensions?.code).toBe('NOT_FOUND');
    expect((await refused('{ issuance(stackId: "stack:nope") { id } }')).extensions?.code).toBe('NOT_FOUND');
    expect((await refused('{ residues(kind: "nope") { id } }')).extensions?.code).toBe('BAD_REQUEST');
    expect(await ok('{ stack(id: "stack:nope") { id } residue(id: "residue:nope") { id } memoryNode(cid: "cog://x@0") { cid } }')).toEqual({
      stack: null,
      residue: null,
      memoryNode: null,
    });
  });
});
