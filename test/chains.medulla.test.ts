// Medulla node over its real RPC: both request forms, manual mining, restart, Synaptic Field
// proofs, coherence commitments and equivocation, and the gateway routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateIdentity, sign } from '../lib/crypto.ts';
import { createHttp, listen } from '../lib/http.ts';
import { verifySynapticProof } from '../lib/mmr.ts';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import chainsRest from '../compat-rest/chains.ts';
import { createMedulla, type MedullaService } from '../subgraphs/chains/medulla/service.ts';
import { medullaRpc } from '../subgraphs/chains/medulla/client.ts';
import type { Block } from '../subgraphs/chains/medulla/header.ts';
import { computeRoots, crossRootOf, tupleMessage } from '../subgraphs/chains/thalamus/coherence.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { submitProof } from '../subgraphs/residues/residues.ts';

let p: TestPlatform;
let m: MedullaService;
const opts = { port: 0, autoMine: false, intervalMs: 1, genesisDifficulty: 1, node: 'm1' };

const post = async (url: string, body: string) => {
  const res = await fetch(`${url}/rpc`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, body: (await res.json()) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
};

beforeAll(async () => {
  p = await testPlatform();
  m = await createMedulla(p, opts);
});
afterAll(async () => {
  await m?.close();
  await p?.cleanup();
});

describe('medulla rpc', () => {
  it('answers the plain and the JSON-RPC 2.0 forms, with standard errors', async () => {
    const plain: { status: number; body: any } = await post(m.url, JSON.stringify({ method: 'getinfo', params: {} }));
    expect(plain.status).toBe(200);
    expect(plain.body.result).toMatchObject({ epoch: 0, height: 0, difficulty: 1 });
    expect(plain.body.result.tip).toMatch(/^[0-9a-f]{64}$/);
    // The plain form also carries the result's fields at the top level.
    expect(plain.body).toMatchObject({ epoch: 0, height: 0, difficulty: 1, tip: plain.body.result.tip });
    expect(plain.body.jsonrpc).toBeUndefined();
    const rpc = await post(m.url, JSON.stringify({ jsonrpc: '2.0', id: 'a', method: 'getblock', params: [0] }));
    expect(rpc.body).toMatchObject({ jsonrpc: '2.0', id: 'a', result: { height: 0, epoch: 0, blockHash: plain.body.result.tip } });
    expect((await post(m.url, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'getblock', params: { height: 0 } }))).body.result.height).toBe(0);
    const parse = await post(m.url, '{"jsonrpc":');
    expect(parse.status).toBe(400);
    expect(parse.body.error.code).toBe(-32700);
    expect((await post(m.url, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 7 }))).body.error.code).toBe(-32600);
    expect((await post(m.url, JSON.stringify({ jsonrpc: '1.0', id: 3, method: 'getinfo' }))).body.error.code).toBe(-32600);
    expect((await post(m.url, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'nope' }))).body).toMatchObject({ id: 4, error: { code: -32601 } });
    expect((await post(m.url, JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'getblock', params: ['x'] }))).body.error.code).toBe(-32602);
    const missing = await post(m.url, JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'getblock', params: [999] }));
    expect(missing.status).toBe(200);
    expect(missing.body.error.code).toBe(-32004);
    const plainMissing = await post(m.url, JSON.stringify({ method: 'getblock', params: [999] }));
    expect(plainMissing.status).toBe(404);
    const batch = await post(
      m.url,
      JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'getinfo' },
        { jsonrpc: '2.0', id: 2, method: 'nope' },
      ]),
    );
    expect(batch.body.map((r: { id: number }) => r.id)).toEqual([1, 2]);
    expect((await post(m.url, JSON.stringify({ method: 'submitblock', params: [{ height: 'x' }] }))).status).toBe(400);
    const health = await (await fetch(`${m.url}/health`)).json();
    expect(health).toMatchObject({ ok: true, name: 'medulla', height: 0, epoch: 0, peers: 0, ts: expect.any(Number) });
    expect(Math.abs(health.ts - Date.now())).toBeLessThan(60_000); // Unix ms, like every health
  });

  it('mines concurrent manual requests into their own blocks, and a restart resumes from the stored tip', async () => {
    const blocks = await Promise.all([0, 1, 2].map(() => medullaRpc<Block>(m.url, 'mineblock')));
    expect(blocks.map((b) => b.height).sort()).toEqual([1, 2, 3]);
    for (const b of blocks) {
      expect(b).toMatchObject({ epoch: b.height, crossRoot: '0'.repeat(64), evmRoot: '0'.repeat(64), ipfsRoot: '0'.repeat(64), sleevesRoot: '0'.repeat(64) });
      expect(b.ts).toBe(Math.floor(b.tsMs / 1000));
      expect(b.synapticFieldRoot).toMatch(/^[0-9a-f]{64}$/);
    }
    const tip = (await medullaRpc<{ tip: string; height: number }>(m.url, 'getinfo')).tip;
    await m.close();
    m = await createMedulla(p, opts);
    const after = await medullaRpc<{ tip: string; height: number }>(m.url, 'getinfo');
    expect(after).toMatchObject({ tip, height: 3 });
    expect((await medullaRpc<Block>(m.url, 'mineblock')).prevHash).toBe(tip);
  });

  it('serves Synaptic Field proofs that verify (8 hashes over a full window) and fail when tampered', async () => {
    for (let h = (await medullaRpc<{ height: number }>(m.url, 'getinfo')).height; h < 262; h++) await m.node.mineNow();
    type ProofResult = { root: string; blockHash: string; atHeight: number; proof: { leaf: string; index: number; size: number; hashes: string[] } };
    const r = await medullaRpc<ProofResult>(m.url, 'getsynapticproof', [100]);
    expect(r.atHeight).toBe(262);
    expect(r.proof.size).toBe(256);
    expect(r.proof.hashes).toHaveLength(8);
    expect(r.proof.leaf).toBe(r.blockHash);
    expect(r.root).toBe((await medullaRpc<Block>(m.url, 'getblock', [262])).synapticFieldRoot);
    expect(verifySynapticProof(r.proof, r.root)).toBe(true);
    const flipped = r.proof.hashes[3].replace(/^./, (c) => (c === '0' ? '1' : '0'));
    expect(verifySynapticProof({ ...r.proof, hashes: r.proof.hashes.map((h, i) => (i === 3 ? flipped : h)) }, r.root)).toBe(false);
    expect(verifySynapticProof({ ...r.proof, index: r.proof.index + 1 }, r.root)).toBe(false);
    expect(verifySynapticProof({ ...r.proof, leaf: (await medullaRpc<Block>(m.url, 'getblock', [101])).blockHash }, r.root)).toBe(false);
    const older = await medullaRpc<ProofResult>(m.url, 'getsynapticproof', [10, 20]);
    expect(verifySynapticProof(older.proof, older.root)).toBe(true);
    await expect(medullaRpc(m.url, 'getsynapticproof', [262])).rejects.toMatchObject({ code: -32602 });
    await expect(medullaRpc(m.url, 'getsynapticproof', [1, 262])).rejects.toMatchObject({ code: -32602 });
  }, 60_000);

  it('commits a submitted tuple into the next block, and one operator with two tuples is an equivocation', async () => {
    const op = generateIdentity();
    const tip = (await medullaRpc<{ height: number }>(m.url, 'getinfo')).height;
    const epoch = tip - 1;
    const a = { epoch, ...computeRoots({ evmTxHashes: [], cids: ['cog://a@1'], sleeves: [] }) };
    const b = { epoch, ...computeRoots({ evmTxHashes: [], cids: ['cog://b@1'], sleeves: [] }) };
    const args = (t: typeof a, sig = sign(tupleMessage(t), op.identityPriv)) => [t.epoch, t.crossRoot, t.evmRoot, t.ipfsRoot, t.sleevesRoot, op.pubKey, sig];
    await expect(medullaRpc(m.url, 'submitcoherenceroot', [epoch, '11'.repeat(32), a.evmRoot, a.ipfsRoot, a.sleevesRoot])).rejects.toMatchObject({
      code: -32602,
    });
    await expect(medullaRpc(m.url, 'submitcoherenceroot', args(a, sign(tupleMessage(b), op.identityPriv)))).rejects.toMatchObject({ code: -32602 });
    expect(await p.db.prisma.coherenceSubmission.count()).toBe(0);

    expect(await medullaRpc(m.url, 'submitcoherenceroot', args(a))).toMatchObject({ accepted: true, epoch, crossRoot: a.crossRoot, equivocation: false });
    expect(await medullaRpc(m.url, 'submitcoherenceroot', args(a))).toMatchObject({ equivocation: false });
    expect(await p.db.prisma.residue.count({ where: { kind: 'routing-equivocation' } })).toBe(0);
    expect(await medullaRpc(m.url, 'submitcoherenceroot', args(b))).toMatchObject({ accepted: true, equivocation: true });
    expect(await medullaRpc(m.url, 'submitcoherenceroot', args(b))).toMatchObject({ equivocation: true });
    const residues = await p.db.prisma.residue.findMany({ where: { kind: 'routing-equivocation' } });
    expect(residues).toHaveLength(1);
    expect(residues[0]).toMatchObject({ bountyMilli: 10_000, status: 'open' });
    const slash = await p.db.prisma.eventOutbox.findMany({ where: { subject: 'cog.treasury.slash' } });
    expect(slash).toHaveLength(1);
    expect(slash[0].data).toMatchObject({ operator: op.pubKey, epoch, reason: 'routing-equivocation' });
    expect(JSON.stringify(slash[0].data)).not.toContain(op.identityPriv);

    // The first tuple is the one committed, in the next block; unsigned submissions are `anonymous`.
    const next = await m.node.mineNow();
    expect(next).toMatchObject({ coherenceEpoch: epoch, crossRoot: a.crossRoot, evmRoot: a.evmRoot, ipfsRoot: a.ipfsRoot, sleevesRoot: a.sleevesRoot });
    const c = { epoch: epoch + 5, ...computeRoots({ evmTxHashes: [], cids: [], sleeves: [{ type: 'ai', id: 'sleeve:ai:1:00000000' }] }) };
    expect(await medullaRpc(m.url, 'submitcoherenceroot', [c.epoch, c.crossRoot, c.evmRoot, c.ipfsRoot, c.sleevesRoot])).toMatchObject({
      operator: 'anonymous',
    });
    // A tuple for a future epoch waits for that epoch's block.
    for (let h = next.height + 1; h < c.epoch; h++) expect((await m.node.mineNow()).coherenceEpoch).toBeNull();
    expect((await m.node.mineNow()).coherenceEpoch).toBe(c.epoch);
    expect(await medullaRpc(m.url, 'getcoherence', [epoch])).toMatchObject({ blockHash: next.blockHash, crossRoot: a.crossRoot });

    // Every committed block's crossRoot recomputes from its tuple.
    const all = await medullaRpc<Block[]>(m.url, 'getheaders', [0, 500]);
    const committed = all.filter((x) => x.coherenceEpoch !== null);
    expect(committed.length).toBe(2);
    for (const x of committed) expect(crossRootOf(x.evmRoot, x.ipfsRoot, x.sleevesRoot)).toBe(x.crossRoot);
    expect(all.filter((x) => x.coherenceEpoch === null).every((x) => x.crossRoot === '0'.repeat(64))).toBe(true);

    // Two different unsigned tuples (the spec's five-parameter form) for one epoch: an equivocation
    // of operator 'anonymous', claimable with the two tuples Medulla recorded.
    const e2 = (await medullaRpc<{ height: number }>(m.url, 'getinfo')).height + 1;
    const u1 = { epoch: e2, ...computeRoots({ evmTxHashes: [], cids: ['cog://u1@1'], sleeves: [] }) };
    const u2 = { epoch: e2, ...computeRoots({ evmTxHashes: [], cids: ['cog://u2@1'], sleeves: [] }) };
    const plain = (t: typeof u1) => [t.epoch, t.crossRoot, t.evmRoot, t.ipfsRoot, t.sleevesRoot];
    await medullaRpc(m.url, 'submitcoherenceroot', plain(u1));
    expect(await medullaRpc(m.url, 'submitcoherenceroot', plain(u2))).toMatchObject({ operator: 'anonymous', equivocation: true });
    const anon = await p.db.prisma.residue.findUniqueOrThrow({ where: { dedupeKey: `routing-equivocation:anonymous:${e2}` } });
    // ...but no slash request: the Treasury would drop it (an anonymous operator holds no stake).
    expect(
      (await p.db.prisma.eventOutbox.findMany({ where: { subject: 'cog.treasury.slash' } })).map((r) => (r.data as { operator: string }).operator),
    ).not.toContain('anonymous');
    const finder = await createStack(p, { name: 'equivocation-finder' });
    const u3 = { epoch: e2, ...computeRoots({ evmTxHashes: [], cids: ['cog://u3@1'], sleeves: [] }) };
    for (const tuples of [[u1, u3], [u1, u1], [u1, { ...u2, crossRoot: u1.crossRoot }], [u1]]) {
      await expect(submitProof(p, anon.id, { claimant: finder.id, proof: { tuples } })).rejects.toMatchObject({ code: 'INVALID_PROOF' });
    }
    expect(await submitProof(p, anon.id, { claimant: finder.id, proof: { tuples: [u2, u1] } })).toMatchObject({ status: 'resolved', bounty: 10 });
  }, 30_000);

  it('gateway: GET /v1/epochs/current and POST /v1/mining/block go through Medulla', async () => {
    const app = createHttp({ name: 'gw-test', log: p.log });
    p.config.urls.medulla = m.url;
    await app.register(chainsRest, { platform: p });
    const port = await listen(app, 'gw-test', '127.0.0.1', 0);
    try {
      const cur = await (await fetch(`http://127.0.0.1:${port}/v1/epochs/current`)).json();
      const info = await medullaRpc<{ epoch: number; height: number; tip: string }>(m.url, 'getinfo');
      expect(cur).toEqual({ epoch: info.epoch, height: info.height, tip: info.tip });
      const res = await fetch(`http://127.0.0.1:${port}/v1/mining/block`, { method: 'POST' });
      expect(res.status).toBe(200);
      const block = (await res.json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(block).toMatchObject({ height: info.height + 1, epoch: info.epoch + 1, prevHash: info.tip });
      for (const k of ['blockHash', 'crossRoot', 'evmRoot', 'ipfsRoot', 'sleevesRoot', 'synapticFieldRoot']) expect(block[k]).toMatch(/^[0-9a-f]{64}$/);
      expect(Number.isInteger(block.difficulty) && Number.isInteger(block.ts)).toBe(true);
    } finally {
      await app.close();
    }
  });
});
