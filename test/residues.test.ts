// Residues: triggers from real causes, proofs checked against real state, exactly one winner of
// 100 concurrent proofs, expiry, and the /v1 routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createHttp } from '../lib/http.ts';
import { generateIdentity, randomSecret, seal, sign } from '../lib/crypto.ts';
import { createStack } from '../subgraphs/stacks/stacks.ts';
import { spawnSleeve, syncSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { openResidueNow, openResiduesPart, RESIDUE_BOUNTY, type OpenResidue } from '../subgraphs/residues/open.ts';
import { runStatement } from '../lib/db/statement.ts';
import { expireResidues, getResidue, listResidues, submitProof } from '../subgraphs/residues/residues.ts';
import { coherenceTupleMessage } from '../flows/residue-proofs.ts';
import { residueCollector } from '../flows/worker-passes.ts';
import { balanceOf, poolAccount } from '../subgraphs/economy/ledger.ts';
import { localHippocampus } from '../subgraphs/memory/hippocampus/client.ts';
import { computeCid, payloadKey, parseCid } from '../subgraphs/memory/hippocampus/cid.ts';
import { putNode } from '../subgraphs/memory/hippocampus/store.ts';
import residuesRest from '../compat-rest/residues.ts';

let p: TestPlatform;
let app: FastifyInstance;
beforeAll(async () => {
  p = await testPlatform();
  p.ports.hippocampus = localHippocampus(p);
  app = createHttp({ name: 'gateway-test', log: p.log });
  await app.register(residuesRest, { platform: p });
  await app.ready();
});
afterAll(async () => {
  await app.close();
  await p.cleanup();
});

const expiry = () => p.config.residueExpiryEpochs;

async function putPinned(stackId: string, epoch: number, text: string) {
  const data = JSON.stringify(seal(randomSecret(32), text));
  const node = { data, links: [] as string[], epoch, stackId };
  const cid = computeCid(node);
  await putNode(p.db.prisma, p.objects, { ...node, cid, pinned: true }, p.epochs.current());
  return { cid, data };
}

describe('stale-ordering', () => {
  it('fires 4 epochs behind, proof needs a sync, and pays 2 RT to the claimant pool', async () => {
    p.setEpoch(10);
    const stack = await createStack(p, { name: 'stale' });
    const sleeve = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
    await syncSleeve(p, sleeve.id); // syncEpoch 10
    p.setEpoch(13);
    await residueCollector(p, 13);
    expect((await listResidues(p)).filter((r) => r.sleeveId === sleeve.id)).toHaveLength(0);
    p.setEpoch(14);
    await residueCollector(p, 14);
    await residueCollector(p, 14); // dedupe: one per sleeve and syncEpoch
    const mine = (await listResidues(p)).filter((r) => r.sleeveId === sleeve.id);
    expect(mine).toHaveLength(1);
    const r = mine[0]!;
    expect(r).toMatchObject({ kind: 'stale-ordering', bounty: 2, status: 'open', stackId: stack.id, epoch: 14, expiresAtEpoch: 14 + expiry() });
    const claimant = await createStack(p, { name: 'hunter' });
    await expect(submitProof(p, r.id, { claimant: claimant.id, proof: {} })).rejects.toMatchObject({ status: 422, code: 'INVALID_PROOF' });
    expect((await getResidue(p, r.id)).status).toBe('open');
    await syncSleeve(p, sleeve.id);
    const done = await submitProof(p, r.id, { claimant: claimant.id, proof: {} });
    expect(done).toMatchObject({ status: 'resolved', claimant: claimant.id });
    expect((await balanceOf(p.db.prisma, poolAccount(claimant.id))).residue).toBe(2);
    await expect(submitProof(p, r.id, { claimant: claimant.id, proof: {} })).rejects.toMatchObject({ status: 409 });
    const intents = await p.db.prisma.chainOutbox.findMany({ where: { ref: r.id } });
    expect(intents.map((i) => i.kind).sort()).toEqual(['claimResidue', 'openResidue', 'validationRequest', 'validationResponse']);
  });
});

describe('proofs', () => {
  it('exactly one of 100 concurrent valid proofs wins the bounty', async () => {
    const operator = generateIdentity();
    const epoch = 20;
    const { residue } = await openResidueNow(p.db.prisma, {
      kind: 'routing-equivocation',
      trigger: 'two tuples for epoch 20',
      epoch,
      evidence: { operator: operator.pubKey, epoch },
      dedupeKey: `eq:${operator.pubKey}:${epoch}`,
      expiryEpochs: expiry(),
    });
    const tuple = (fill: string) => {
      const t = { epoch, crossRoot: fill.repeat(64), evmRoot: '1'.repeat(64), ipfsRoot: '2'.repeat(64), sleevesRoot: '3'.repeat(64) };
      return { ...t, signature: sign(coherenceTupleMessage(t), operator.identityPriv) };
    };
    const proof = { tuples: [tuple('a'), tuple('b')] };
    // Not valid: the same tuple twice, a tuple signed by someone else.
    await expect(
      submitProof(p, residue.id, { claimant: (await createStack(p, { name: 'x' })).id, proof: { tuples: [tuple('a'), tuple('a')] } }),
    ).rejects.toMatchObject({ status: 422 });
    const other = generateIdentity();
    const forged = { ...tuple('b'), signature: sign(coherenceTupleMessage(tuple('b')), other.identityPriv) };
    await expect(
      submitProof(p, residue.id, { claimant: (await createStack(p, { name: 'y' })).id, proof: { tuples: [tuple('a'), forged] } }),
    ).rejects.toMatchObject({ status: 422 });

    const claimants = await Promise.all(Array.from({ length: 10 }, (_, i) => createStack(p, { name: `c${i}` })));
    const results = await Promise.allSettled(Array.from({ length: 100 }, (_, i) => submitProof(p, residue.id, { claimant: claimants[i % 10]!.id, proof })));
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as { status: number }).status).toBe(409);
    const winner = (won[0] as PromiseFulfilledResult<{ claimant: string }>).value.claimant;
    const paid = await Promise.all(claimants.map(async (c) => (await balanceOf(p.db.prisma, poolAccount(c.id))).residue));
    expect(paid.reduce((a, b) => a + b, 0)).toBe(RESIDUE_BOUNTY['routing-equivocation']);
    expect((await balanceOf(p.db.prisma, poolAccount(winner))).residue).toBe(RESIDUE_BOUNTY['routing-equivocation']);
    expect(await getResidue(p, residue.id)).toMatchObject({ status: 'resolved', claimant: winner });
  });

  it('shard-loss: the proof holds only once the CID is readable again', async () => {
    const stack = await createStack(p, { name: 'shards' });
    const { cid, data } = await putPinned(stack.id, p.epochs.current(), 'fragment');
    await p.objects.delete(payloadKey(parseCid(cid)!.hash)); // the payload is lost
    const { residue } = await openResidueNow(p.db.prisma, {
      kind: 'shard-loss',
      trigger: `${cid} unreachable`,
      stackId: stack.id,
      epoch: p.epochs.current(),
      evidence: { cid },
      dedupeKey: `shard-loss:${cid}`,
      expiryEpochs: expiry(),
    });
    await expect(submitProof(p, residue.id, { claimant: stack.id, proof: {} })).rejects.toMatchObject({ status: 422 });
    await p.objects.put(payloadKey(parseCid(cid)!.hash), new TextEncoder().encode(data)); // restored
    expect(await submitProof(p, residue.id, { claimant: stack.id, proof: {} })).toMatchObject({ status: 'resolved', bounty: 15 });
    expect((await balanceOf(p.db.prisma, poolAccount(stack.id))).residue).toBe(15);
  });

  it('speculative-divergence: the merge node must link both heads', async () => {
    const stack = await createStack(p, { name: 'branches' });
    const e = p.epochs.current();
    const a = await putPinned(stack.id, e, 'main');
    const b = await putPinned(stack.id, e, 'shadow');
    const { residue } = await openResidueNow(p.db.prisma, {
      kind: 'speculative-divergence',
      trigger: 'branch',
      stackId: stack.id,
      epoch: e,
      evidence: { headCid: b.cid, mainHeadCid: a.cid },
      dedupeKey: `branch:${b.cid}`,
      expiryEpochs: expiry(),
    });
    const onlyA = JSON.stringify(seal(randomSecret(32), 'merge?'));
    const half = { data: onlyA, links: [a.cid], epoch: e, stackId: stack.id };
    await putNode(p.db.prisma, p.objects, { ...half, cid: computeCid(half) }, e);
    await expect(submitProof(p, residue.id, { claimant: stack.id, proof: { mergeCid: computeCid(half) } })).rejects.toMatchObject({ status: 422 });
    const merge = { data: onlyA, links: [a.cid, b.cid], epoch: e, stackId: stack.id };
    await putNode(p.db.prisma, p.objects, { ...merge, cid: computeCid(merge) }, e);
    expect(await submitProof(p, residue.id, { claimant: stack.id, proof: { mergeCid: computeCid(merge) } })).toMatchObject({ status: 'resolved', bounty: 5 });
  });

  it('historical-non-canonical: every broken CID must be readable again', async () => {
    const stack = await createStack(p, { name: 'hnc' });
    const e = p.epochs.current();
    const n = await putPinned(stack.id, e, 'old');
    const { residue } = await openResidueNow(p.db.prisma, {
      kind: 'historical-non-canonical',
      trigger: 'recall fidelity 0.5 below 0.6',
      stackId: stack.id,
      epoch: e,
      evidence: { fidelity: 0.5, broken: [n.cid, 'cog://' + 'f'.repeat(64) + '@1'] },
      dedupeKey: `hnc:${stack.id}:${e}`,
      expiryEpochs: expiry(),
    });
    await expect(submitProof(p, residue.id, { claimant: stack.id, proof: {} })).rejects.toMatchObject({ status: 422 });
    await expect(submitProof(p, residue.id, { claimant: 'stack:nobody', proof: {} })).rejects.toMatchObject({ status: 404 });
    expect((await getResidue(p, residue.id)).status).toBe('open');
    // Once everything it reported broken is readable (here: pinned), the history is canonical again.
    const healed = await openResidueNow(p.db.prisma, {
      kind: 'historical-non-canonical',
      trigger: 'recall fidelity 0.5 below 0.6',
      stackId: stack.id,
      epoch: e,
      evidence: { fidelity: 0.5, broken: [n.cid] },
      dedupeKey: `hnc2:${stack.id}:${e}`,
      expiryEpochs: expiry(),
    });
    expect(await submitProof(p, healed.residue.id, { claimant: stack.id, proof: {} })).toMatchObject({ status: 'resolved', bounty: 8 });
  });
});

describe('opening', () => {
  it('several residues in one statement: the rows, Cortex intents and events openResidue writes, each cause once', async () => {
    const stack = await createStack(p, { name: 'batch-opened' });
    const cause = (i: number, sleeveId?: string): OpenResidue => ({
      kind: i % 2 ? 'speculative-divergence' : 'shard-loss',
      trigger: `cause ${i}`,
      stackId: stack.id,
      ...(sleeveId ? { sleeveId } : {}),
      epoch: 700 + i,
      evidence: { i, nested: { list: [i, 'x'] } },
      dedupeKey: `batch-test:${stack.id}:${i}`,
      expiryEpochs: 12,
    });
    // The first cause opened alone beforehand: the batch leaves it as it is.
    const alone = await openResidueNow(p.db.prisma, cause(0));
    const part = openResiduesPart([cause(0), cause(1, 'sleeve:0xabc'), cause(2), cause(1, 'sleeve:0xabc')])!;
    expect((await runStatement(p.db, [part])).residues_opened).toBe(2);
    const rows = await p.db.prisma.residue.findMany({ where: { dedupeKey: { startsWith: `batch-test:${stack.id}:` } }, orderBy: { epoch: 'asc' } });
    expect(rows.map((r) => [r.dedupeKey, r.kind, r.bountyMilli, r.status, r.epoch, r.expiresAtEpoch, r.sleeveId, r.chainStatus])).toEqual([
      [`batch-test:${stack.id}:0`, 'shard-loss', 15_000, 'open', 700, 712, null, 'pending'],
      [`batch-test:${stack.id}:1`, 'speculative-divergence', 5_000, 'open', 701, 713, 'sleeve:0xabc', 'pending'],
      [`batch-test:${stack.id}:2`, 'shard-loss', 15_000, 'open', 702, 714, null, 'pending'],
    ]);
    expect(rows[0]!.id).toBe(alone.residue.id);
    expect(rows[1]!.evidence).toEqual({ i: 1, nested: { list: [1, 'x'] } });
    // Each as openResidue writes it: the intent, and the event carrying residueView of the row.
    for (const row of rows) {
      const intents = await p.db.prisma.chainOutbox.findMany({ where: { kind: 'openResidue', ref: row.id } });
      expect(intents.map((x) => [x.payload, x.epoch, x.status])).toEqual([
        [{ residueId: row.id, kind: row.kind, bountyMilli: row.bountyMilli }, row.epoch, 'pending'],
      ]);
      const events = await p.db.prisma.eventOutbox.findMany({ where: { msgId: `residue-opened:${row.id}` } });
      expect(events).toHaveLength(1);
      expect(events[0]!.subject).toBe('cog.residue.opened');
      const { ts, ...data } = events[0]!.data as { ts: number };
      expect(typeof ts).toBe('number');
      expect(data).toEqual({ type: 'residue.opened', residue: await getResidue(p, row.id) });
    }
    expect(openResiduesPart([])).toBeNull();
  });
});

describe('lifecycle', () => {
  it('open residues expire after the expiry setting', async () => {
    const e = p.epochs.current();
    const { residue } = await openResidueNow(p.db.prisma, {
      kind: 'reorg-orphan',
      trigger: 'anchor detached',
      epoch: e,
      evidence: { epoch: e, crossRoot: 'c'.repeat(64) },
      dedupeKey: `reorg:${e}`,
      expiryEpochs: 3,
    });
    expect(await expireResidues(p, e + 2)).not.toContain(residue.id);
    expect(await expireResidues(p, e + 3)).toContain(residue.id);
    expect((await getResidue(p, residue.id)).status).toBe('expired');
    await expect(submitProof(p, residue.id, { claimant: (await createStack(p, { name: 'late' })).id, proof: { height: 1 } })).rejects.toMatchObject({
      status: 409,
    });
  });
});

describe('/v1/coordination/residues', () => {
  it('lists the last 50 newest first, reads one, takes proofs with problem+json errors', async () => {
    for (let i = 0; i < 55; i++) {
      await openResidueNow(p.db.prisma, { kind: 'reorg-orphan', trigger: `t${i}`, epoch: 1, evidence: {}, dedupeKey: `bulk:${i}`, expiryEpochs: 100 });
    }
    const list = await app.inject({ method: 'GET', url: '/v1/coordination/residues' });
    expect(list.statusCode).toBe(200);
    const rows = list.json() as Array<{ id: string; openedAt: string; trigger: string }>;
    expect(rows).toHaveLength(50);
    expect(rows[0]!.trigger).toBe('t54');
    for (let i = 1; i < rows.length; i++) expect(rows[i - 1]!.openedAt >= rows[i]!.openedAt).toBe(true);
    const one = await app.inject({ method: 'GET', url: `/v1/coordination/residues/${encodeURIComponent(rows[0]!.id)}` });
    expect(one.json()).toMatchObject({ id: rows[0]!.id, kind: 'reorg-orphan', bounty: 12, status: 'open' });
    expect((await app.inject({ method: 'GET', url: '/v1/coordination/residues/residue:none' })).statusCode).toBe(404);
    const bad = await app.inject({ method: 'POST', url: `/v1/coordination/residues/${encodeURIComponent(rows[0]!.id)}/proof`, payload: { claimant: 7 } });
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['content-type']).toMatch(/problem\+json/);
    const stack = await createStack(p, { name: 'rest' });
    const invalid = await app.inject({
      method: 'POST',
      url: `/v1/coordination/residues/${encodeURIComponent(rows[0]!.id)}/proof`,
      payload: { claimant: stack.id, proof: { height: 'x' } },
    });
    expect(invalid.statusCode).toBe(422);
    expect(invalid.json()).toMatchObject({ code: 'INVALID_PROOF' });
  });
});
