// Worker Runner: each pass once per epoch in total with two runners, takeover from a dead runner,
// and each pass doing its job from real signals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createStack, getStackRow } from '../subgraphs/stacks/stacks.ts';
import { addDrift, getSleeveRow, spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { perceive } from '../flows/memory.ts';
import { reconcileBranches } from '../flows/worker-memory.ts';
import { localHippocampus } from '../subgraphs/memory/hippocampus/client.ts';
import { createRunner } from '../subgraphs/residues/worker/runner.ts';
import { workerStarter } from '../subgraphs/residues/worker/service.ts';
import { PASSES, driftChecker, epochAnchor, memoryReconciler, sleeveWatchdog } from '../flows/worker-passes.ts';
import { listResidues, submitProof } from '../subgraphs/residues/residues.ts';
import { issuance } from '../subgraphs/economy/treasury.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform();
  p.ports.hippocampus = localHippocampus(p);
});
afterAll(async () => p.cleanup());

const passNames = PASSES.map(([n]) => n);

describe('runner leases', () => {
  it('runs each pass once per epoch in total with two runners', async () => {
    const stack = await createStack(p, { name: 'emitted' });
    const a = createRunner(p, { id: 'runner-a' });
    const b = createRunner(p, { id: 'runner-b' });
    for (const epoch of [101, 102, 103]) {
      const [ra, rb] = await Promise.all([a.runEpoch(epoch), b.runEpoch(epoch)]);
      for (const n of passNames) expect([ra[n], rb[n]].sort()).toEqual(['ran', 'skipped']);
      expect(await a.runEpoch(epoch)).toEqual(Object.fromEntries(passNames.map((n) => [n, 'skipped'])));
    }
    const rows = await p.db.prisma.passRun.findMany({ where: { epoch: { in: [101, 102, 103] } } });
    expect(rows).toHaveLength(18);
    expect(rows.every((r) => r.finishedAt && ['runner-a', 'runner-b'].includes(r.runner))).toBe(true);
    // The treasury-emitter recorded each epoch's emission once (the stack's is computed when asked).
    const recorded = await p.db.prisma.emissionEpoch.findMany({ where: { epoch: { in: [101, 102, 103] } }, orderBy: { epoch: 'asc' } });
    expect(recorded.map((r) => [r.epoch, r.stacks])).toEqual([
      [101, 1],
      [102, 1],
      [103, 1],
    ]);
    p.setEpoch(103);
    expect((await issuance(p, stack.id, 3)).map((e) => e.epoch)).toEqual([103, 102, 101]);
  });

  it('two worker services on epoch advances: once per epoch in total', async () => {
    const start = workerStarter({ leaseMs: 60_000 });
    const w1 = await start(p);
    const w2 = await start(p);
    try {
      p.setEpoch(201);
      p.setEpoch(202);
      await expect
        .poll(async () => p.db.prisma.passRun.count({ where: { epoch: { in: [201, 202] }, finishedAt: { not: null } } }), { timeout: 15_000 })
        .toBe(12);
      const rows = await p.db.prisma.passRun.findMany({ where: { epoch: { in: [201, 202] } } });
      expect(rows).toHaveLength(12);
    } finally {
      await w1.close();
      await w2.close();
    }
  });

  it('a runner that dies mid-pass hands it on after the lease timeout', async () => {
    // Dead leases far past the lease, the live one far inside it: a loaded machine taking seconds
    // between these steps does not make the fresh lease look stale.
    await p.db.prisma.passRun.create({ data: { pass: 'treasury-emitter', epoch: 301, runner: 'dead', startedAt: new Date(Date.now() - 120_000) } });
    p.setEpoch(301);
    const alive = createRunner(p, { id: 'survivor', leaseMs: 30_000 });
    expect(await alive.runPass('treasury-emitter', 301)).toBe('ran'); // stale lease: taken over
    const row = await p.db.prisma.passRun.findUniqueOrThrow({ where: { pass_epoch: { pass: 'treasury-emitter', epoch: 301 } } });
    expect(row.runner).toBe('survivor');
    expect(row.finishedAt).not.toBeNull();
    // A fresh lease held by a live runner is not taken over.
    await p.db.prisma.passRun.create({ data: { pass: 'drift-checker', epoch: 301, runner: 'busy' } });
    expect(await alive.runPass('drift-checker', 301)).toBe('skipped');
    await p.db.prisma.passRun.create({ data: { pass: 'epoch-anchor', epoch: 301, runner: 'dead', startedAt: new Date(Date.now() - 120_000) } });
    expect(await alive.sweep()).toBe(1);
  });
});

describe('passes', () => {
  it('drift-checker flags above the max and emits desync above twice; the watchdog decommissions with a residue', async () => {
    p.setEpoch(400);
    const stack = await createStack(p, { name: 'drifty' });
    const calm = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
    const warm = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
    const hot = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'human', shape: 'A' });
    await p.db.prisma.$transaction(async (tx) => {
      await addDrift(tx, calm.id, 15_000); // exactly the max: not above
      await addDrift(tx, warm.id, 16_000);
      await addDrift(tx, hot.id, 31_000);
    });
    const seen: Array<{ subject: string; data: Record<string, unknown> }> = [];
    const flaggedEvents = await p.db.prisma.eventOutbox.count({ where: { subject: { startsWith: 'cog.sleeve.' } } });
    const r = await driftChecker(p, 400);
    expect(r).toMatchObject({ over: 2, flagged: 2, desynced: 1 });
    expect(await driftChecker(p, 400)).toMatchObject({ flagged: 0 }); // idempotent
    const events = await p.db.prisma.eventOutbox.findMany({ where: { subject: { startsWith: 'cog.sleeve.' } }, orderBy: { id: 'asc' }, skip: flaggedEvents });
    for (const e of events) seen.push({ subject: e.subject, data: e.data as Record<string, unknown> });
    expect(
      seen
        .filter((e) => e.subject.startsWith('cog.sleeve.flagged'))
        .map((e) => e.data.sleeveId)
        .sort(),
    ).toEqual([hot.id, warm.id].sort());
    expect(seen.find((e) => e.subject.startsWith('cog.sleeve.desynced'))!.data).toMatchObject({ id: hot.id, stackId: stack.id, drift: 31 });
    expect((await getSleeveRow(p.db.prisma, warm.id)).flagged).toBe(true);
    expect((await getSleeveRow(p.db.prisma, calm.id)).flagged).toBe(false);

    expect(await sleeveWatchdog(p, 400)).toEqual({ decommissioned: [hot.id] });
    expect(await sleeveWatchdog(p, 400)).toEqual({ decommissioned: [] });
    expect((await getSleeveRow(p.db.prisma, hot.id)).alive).toBe(false);
    expect((await getSleeveRow(p.db.prisma, warm.id)).alive).toBe(true);
    const res = (await listResidues(p)).find((x) => x.sleeveId === hot.id)!;
    expect(res).toMatchObject({ kind: 'stale-ordering', trigger: 'desync: drift 31 above 2 x max (30)', bounty: 2, status: 'open' });
    // The desynced sleeve is decommissioned: that is the proof.
    expect(await submitProof(p, res.id, { claimant: stack.id, proof: {} })).toMatchObject({ status: 'resolved' });
  });

  it('epoch-anchor commits each folded epoch once', async () => {
    const roots = { crossRoot: 'a'.repeat(64), evmRoot: 'b'.repeat(64), ipfsRoot: 'c'.repeat(64), sleevesRoot: 'd'.repeat(64), btcRoot: '0'.repeat(64) };
    await p.db.prisma.epochAnchor.createMany({
      data: [
        { epoch: 500, ...roots },
        { epoch: 501, ...roots },
      ],
    }); // as the Thalamus folds them
    expect((await epochAnchor(p, 501)).anchored).toEqual([500, 501]);
    expect((await epochAnchor(p, 502)).anchored).toEqual([]);
    const intents = await p.db.prisma.chainOutbox.findMany({ where: { kind: 'anchor', ref: { in: ['anchor:500', 'anchor:501'] } } });
    expect(intents).toHaveLength(2);
    expect(intents[0]!.payload).toMatchObject({ epoch: 500, crossRoot: roots.crossRoot });
  });

  it('memory-reconciler merges a real shadow branch and opens a speculative-divergence residue', async () => {
    p.setEpoch(600);
    const stack = await createStack(p, { name: 'co-resident' });
    const a = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
    const b = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'human', shape: 'A' });
    await perceive(p, { sleeveId: a.id, text: 'a saw the sun' });
    const shadow = await perceive(p, { sleeveId: b.id, text: 'b saw the rain' }); // b never saw a's head
    expect(shadow.branchId).not.toBeNull();
    const r = await memoryReconciler(p, 600);
    expect(r).toMatchObject({ merged: 1, residues: 1 });
    expect(await memoryReconciler(p, 600)).toMatchObject({ open: 0, merged: 0 });
    const res = (await listResidues(p)).find((x) => x.kind === 'speculative-divergence' && x.stackId === stack.id)!;
    expect(res).toMatchObject({ bounty: 5, status: 'open', sleeveId: b.id });
    const head = (await getStackRow(p.db.prisma, stack.id)).episodicHead!;
    expect(await submitProof(p, res.id, { claimant: stack.id, proof: { mergeCid: head } })).toMatchObject({ status: 'resolved' });
  });

  it('memory-reconciler opens one residue per sleeve that wrote beside the main line, however many branches it wrote', async () => {
    p.setEpoch(610);
    const stack = await createStack(p, { name: 'taking-turns' });
    const a = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'ai', shape: 'A' });
    const b = await spawnSleeve(p, { stackId: stack.id, embodimentType: 'human', shape: 'A' });
    // Two sleeves writing in turn within one epoch: every write after the first forks.
    let branches = 0;
    for (let i = 0; i < 8; i++) if ((await perceive(p, { sleeveId: i % 2 ? b.id : a.id, text: `turn ${i}` })).branchId) branches++;
    expect(branches).toBe(7);
    const open = await p.db.prisma.memoryBranch.findMany({ where: { stackId: stack.id, status: 'open' } });
    // Three branches a statement: 7 merged in three statements, none left out or merged twice.
    const r = await reconcileBranches(p, 610, 3);
    expect(r).toMatchObject({ open: 7, merged: 7, residues: 2 });
    expect(await memoryReconciler(p, 610)).toMatchObject({ open: 0, merged: 0 });
    // Each records the head, each with its event.
    const mainHead = (await getStackRow(p.db.prisma, stack.id)).episodicHead;
    const rows = await p.db.prisma.memoryBranch.findMany({ where: { id: { in: open.map((b) => b.id) } } });
    expect(rows.map((b) => [b.status, b.mergedCid])).toEqual(open.map(() => ['merged', mainHead]));
    const events = await p.db.prisma.eventOutbox.findMany({ where: { msgId: { in: open.map((b) => `branch-merged:${b.id}`) } } });
    expect(events).toHaveLength(7);
    for (const e of events) {
      const b = open.find((x) => e.msgId === `branch-merged:${x.id}`)!;
      expect(e.subject).toBe(`cog.memory.branch.merged.${stack.id}`);
      expect(e.data).toMatchObject({
        type: 'memory.branch.merged',
        stackId: stack.id,
        branchId: b.id,
        sleeveId: b.sleeveId,
        headCid: b.headCid,
        mergedCid: mainHead,
      });
      expect(typeof (e.data as { ts: unknown }).ts).toBe('number');
    }
    const mine = (await listResidues(p)).filter((x) => x.kind === 'speculative-divergence' && x.stackId === stack.id);
    expect(mine.map((x) => x.sleeveId).sort()).toEqual([a.id, b.id].sort());
    const row = await p.db.prisma.residue.findUniqueOrThrow({ where: { id: mine.find((x) => x.sleeveId === b.id)!.id } });
    expect(row.evidence).toMatchObject({ branches: 4 });
    expect((row.evidence as { branchIds: string[] }).branchIds).toHaveLength(4);
    // The merged head descends from every branch: the proof of either residue.
    const head = (await getStackRow(p.db.prisma, stack.id)).episodicHead!;
    for (const x of mine) expect(await submitProof(p, x.id, { claimant: stack.id, proof: { mergeCid: head } })).toMatchObject({ status: 'resolved' });
  });
});
