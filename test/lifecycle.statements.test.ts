// A stack's creation and a sleeve's spawn, each one statement through the driver after the read of
// its number from a sequence, and a sleeve's decommission, one statement (subgraphs/stacks/stacks.ts
// createStack, subgraphs/sleeves/sleeves.ts spawnSleeve and decommissionSleeve): the rows their
// interactive transactions wrote (the stack with the economy's accrual row; the sleeve on its
// stack's head, its key lease, the mint's posting and balances; the sweep of its tokens to the
// pool, its lease ended; the Cortex intents, the events), refusals that leave nothing behind, and
// concurrency (creations of one pubkey, spawns on one stack, writes racing a decommission).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { countStatements } from './helpers/statements.ts';
import { createStack, getStackRow, stackCore } from '../subgraphs/stacks/stacks.ts';
import { generateIdentity, unwrapSecret } from '../lib/crypto.ts';
import { stackAddress } from '../lib/address.ts';
import { openAccrual } from '../subgraphs/economy/index.ts';
import { INITIAL_TOKENS, decommissionSleeve, getSleeveView, spawnSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { balanceOf, mint, poolAccount, sleeveAccount, toMilli, type Token } from '../subgraphs/economy/ledger.ts';
import { perceive } from '../flows/memory.ts';

const CPV = { syncCoeff: 1, memoryCoeff: 1, computeCoeff: 1, residueCoeff: 1, routingCoeff: 1 };

for (const db of ['pglite', 'postgres'] as const) {
  describe(`lifecycle statements on ${db}`, () => {
    let t: MemoryTestApp;
    beforeAll(async () => {
      t = await memoryTestAppOn(db);
      t.p.setEpoch(4);
    });
    afterAll(async () => {
      await t?.close();
    });

    const prisma = () => t.p.db.prisma;
    const entriesOf = (ref: string, reason: string) =>
      prisma().ledgerEntry.findMany({
        where: { ref, reason },
        orderBy: { id: 'asc' },
        select: { txId: true, account: true, token: true, milli: true, epoch: true },
      });
    const counts = async () => ({
      sleeves: await prisma().sleeve.count(),
      leases: await prisma().keyLease.count(),
      entries: await prisma().ledgerEntry.count(),
      balances: await prisma().balance.count(),
      ledgerIntents: await prisma().chainLedgerIntent.count(),
      outbox: await prisma().chainOutbox.count(),
      events: await prisma().eventOutbox.count(),
    });

    const stackCounts = async () => ({
      stacks: await prisma().stack.count(),
      accruals: await prisma().emissionAccrual.count(),
      outbox: await prisma().chainOutbox.count(),
      events: await prisma().eventOutbox.count(),
    });

    it.each(['A', 'B'] as const)('a Shape %s stack: two driver statements write what the transaction wrote', async (shape) => {
      const identity = generateIdentity();
      const cpv = { syncCoeff: 1.5, memoryCoeff: 0.5, computeCoeff: 2, residueCoeff: 0, routingCoeff: 1 };
      const r = await countStatements(t.p.db, () =>
        createStack(t.p, shape === 'A' ? { name: 'created-a', kind: 'mining', cpv } : { pubkey: identity.pubKey, name: 'created-b', cpv }),
      );
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 0, driver: 2 });
      const created = r.value;
      const row = await getStackRow(prisma(), created.id);
      const owner = stackAddress(row.pubKey);
      if (shape === 'A') {
        expect(created.id).toBe(`stack:mining:${row.tokenId}:${created.id.split(':')[3]}`);
        expect(created.identityPriv).toMatch(/\S/);
      } else {
        expect(created.id).toBe(`stack:${owner}`);
        expect(row.pubKey).toBe(identity.pubKey);
        expect(created.identityPriv).toBeUndefined();
      }
      expect(row).toMatchObject({
        name: shape === 'A' ? 'created-a' : 'created-b',
        kind: shape === 'A' ? 'mining' : 'human',
        shape,
        ...cpv,
        chainStatus: 'pending',
        episodicHead: null,
      });
      expect(unwrapSecret(t.p.masterKey, row.masterSecret, row.id)).toHaveLength(32);
      // The answer is the row as a read gives it (the creation is the stack's first activity).
      const { identityPriv: _, ...view } = created;
      expect(view).toEqual({ ...stackCore(row, 4), sleeves: [], anchors: [], balances: { compute: 0, memory: 0, sync: 0, routing: 0, residue: 0 } });

      // The economy's accrual row is the one openAccrual writes for the same terms.
      const twin = `stack:twin-${shape}`;
      await prisma().$transaction((tx) => openAccrual(tx, twin, 4, { cpv, binding: { floor: row.bindingFloor, decayRate: row.bindingDecay } }));
      const accrual = await prisma().emissionAccrual.findUniqueOrThrow({ where: { stackId: row.id } });
      const expected = await prisma().emissionAccrual.findUniqueOrThrow({ where: { stackId: twin } });
      expect({ ...accrual, stackId: twin }).toEqual(expected);

      // The identity NFT's mint intent and the event.
      const intents = await prisma().chainOutbox.findMany({ where: { ref: row.id } });
      expect(intents).toHaveLength(1);
      expect(intents[0]).toMatchObject({ kind: 'mintIdentity', epoch: 4, status: 'pending' });
      expect(intents[0]!.payload).toEqual({
        stackId: row.id,
        tokenId: row.tokenId,
        owner,
        cpv,
        agentURI: `${t.p.config.urls.base.replace(/\/+$/, '')}/v1/stacks/${encodeURIComponent(row.id)}/registration.json`,
      });
      const events = await prisma().eventOutbox.findMany({ where: { msgId: `stack-created:${row.id}` } });
      expect(events.map((e) => e.subject)).toEqual([`cog.stack.created.${row.id}`]);
      expect(events[0]!.data).toMatchObject({ type: 'stack.created', stackId: row.id, tokenId: row.tokenId, kind: row.kind, pubKey: row.pubKey, shape });
    });

    it('a pubkey taken is a 409 that leaves nothing behind, also when created concurrently', async () => {
      const { pubKey } = generateIdentity();
      await createStack(t.p, { pubkey: pubKey, cpv: CPV });
      const before = await stackCounts();
      await expect(createStack(t.p, { pubkey: pubKey, cpv: CPV })).rejects.toMatchObject({ status: 409, code: 'STACK_EXISTS' });
      expect(await stackCounts()).toEqual(before);

      const other = generateIdentity().pubKey;
      const tries = await Promise.allSettled(Array.from({ length: 6 }, () => createStack(t.p, { pubkey: other, cpv: CPV })));
      expect(tries.filter((x) => x.status === 'fulfilled')).toHaveLength(1);
      for (const x of tries) if (x.status === 'rejected') expect(x.reason).toMatchObject({ status: 409, code: 'STACK_EXISTS' });
      expect(await stackCounts()).toMatchObject({
        stacks: before.stacks + 1,
        accruals: before.accruals + 1,
        outbox: before.outbox + 1,
        events: before.events + 1,
      });
    });

    it.each(['A', 'B'] as const)('a Shape %s sleeve: two driver statements write what the transaction wrote', async (shape) => {
      const stack = await createStack(t.p, { name: `spawn-${shape}` });
      const first = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
      const { cid: head } = await perceive(t.p, { sleeveId: first.id, text: 'before the spawn' });

      const r = await countStatements(t.p.db, () =>
        spawnSleeve(
          t.p,
          shape === 'A' ? { stackId: stack.id, embodimentType: 'human', shape, hostname: 'h1' } : { stackId: stack.id, kind: 'human', shape, tickRate: 500 },
        ),
      );
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 0, driver: 2 });
      const s = r.value;
      expect(s.id).toMatch(shape === 'A' ? /^sleeve:human:\d+:[0-9a-f]{8}$/ : /^sleeve:0x[0-9a-f]{40}$/);

      // The sleeve, on the head its stack had, and the view the spawn answered with is the one a read gives.
      const row = await prisma().sleeve.findUniqueOrThrow({ where: { id: s.id } });
      expect(row).toMatchObject({ stackId: stack.id, embodimentType: 'human', shape, alive: true, frozen: false, spawnEpoch: 4, syncEpoch: 0, seenHead: head });
      expect(row.hostname).toBe(shape === 'A' ? 'h1' : null);
      if (shape === 'B') expect(row.tickRate).toBe(500);
      if (shape === 'A') expect(s.id).toBe(`sleeve:human:${row.seq}:${s.id.split(':')[3]}`);
      expect(s).toEqual(await getSleeveView(t.p, s.id));
      expect(await prisma().keyLease.findUniqueOrThrow({ where: { sleeveId: s.id } })).toMatchObject({ stackId: stack.id, active: true, endedAt: null });

      // The mint: its shape's tokens, one balanced posting in post()'s order (as `mint` writes it), its intent.
      const initial = INITIAL_TOKENS[shape];
      const balances = await balanceOf(prisma(), sleeveAccount(s.id));
      for (const token of ['compute', 'memory', 'sync', 'routing', 'residue'] as Token[]) expect(balances[token]).toBe(initial[token] ?? 0);
      expect(s.tokens).toEqual(balances);
      const entries = await entriesOf(s.id, 'spawn');
      const txId = entries[0]!.txId;
      expect(entries.every((e) => e.txId === txId && e.epoch === 4)).toBe(true);
      const moves = Object.entries(initial).map(([token, units]) => ({ token: token as Token, milli: toMilli(units!) }));
      const ref = `twin-${shape}`;
      await prisma().$transaction((tx) => mint(tx, sleeveAccount(ref), moves, { reason: 'twin', ref, epoch: 4, stackId: stack.id }));
      const twin = await entriesOf(ref, 'twin');
      expect(entries.map((e) => [e.account === sleeveAccount(s.id) ? 'to' : e.account, e.token, e.milli])).toEqual(
        twin.map((e) => [e.account === sleeveAccount(ref) ? 'to' : e.account, e.token, e.milli]),
      );
      const intent = await prisma().chainLedgerIntent.findFirstOrThrow({ where: { ref: `ledger:${txId}` } });
      expect(intent).toMatchObject({ kind: 'mint', epoch: 4 });
      expect(intent.payload).toEqual({ stackId: stack.id, amounts: moves.map((m) => ({ token: m.token, milli: m.milli.toString() })) });

      // Its Cortex record intent and its event.
      const spawned = await prisma().chainOutbox.findMany({ where: { ref: s.id } });
      expect(spawned).toHaveLength(1);
      expect(spawned[0]).toMatchObject({ kind: 'spawnSleeve', epoch: 4, status: 'pending' });
      expect(spawned[0]!.payload).toEqual({ sleeveId: s.id, stackId: stack.id, kind: 'human', tokenId: stack.tokenId });
      const events = (await prisma().eventOutbox.findMany({ where: { msgId: `sleeve-spawned:${s.id}` } })).map((e) => ({ subject: e.subject, data: e.data }));
      expect(events).toHaveLength(1);
      expect(events[0]!.subject).toBe(`cog.sleeve.spawned.${stack.id}`);
      expect(events[0]!.data).toMatchObject({
        type: 'sleeve.spawned',
        stackId: stack.id,
        sleeveId: s.id,
        kind: 'human',
        tickRate: row.tickRate,
        hostname: row.hostname,
      });
    });

    it('an unknown stack is a 404 that leaves nothing behind', async () => {
      const before = await counts();
      await expect(spawnSleeve(t.p, { stackId: 'stack:ai:999999:000000000000', kind: 'ai', shape: 'B' })).rejects.toMatchObject({ status: 404 });
      await expect(spawnSleeve(t.p, { stackId: 'stack:ai:999999:000000000000', embodimentType: 'ai', shape: 'A' })).rejects.toMatchObject({ status: 404 });
      expect(await counts()).toEqual(before);
    });

    it('concurrent spawns on one stack: each its own number, lease and tokens, the ledger balanced', async () => {
      const stack = await createStack(t.p, { name: 'spawn-many' });
      const made = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          spawnSleeve(t.p, i % 2 ? { stackId: stack.id, embodimentType: 'mining', shape: 'A' } : { stackId: stack.id, kind: 'memory', shape: 'B' }),
        ),
      );
      const rows = await prisma().sleeve.findMany({ where: { stackId: stack.id } });
      expect(rows).toHaveLength(24);
      expect(new Set(rows.map((r) => r.seq)).size).toBe(24);
      expect(await prisma().keyLease.count({ where: { stackId: stack.id, active: true } })).toBe(24);
      for (const s of made) expect(s.tokens.compute).toBe(s.id.startsWith('sleeve:mining:') ? 250 : 1000);
      const sums = await prisma().ledgerEntry.groupBy({ by: ['token'], where: { reason: 'spawn', ref: { in: made.map((s) => s.id) } }, _sum: { milli: true } });
      expect(sums.length).toBe(4);
      for (const s of sums) expect(s._sum.milli).toBe(0n);
    });

    it('a decommission: one driver statement sweeps the tokens to the pool, ends the lease, records its intent and event', async () => {
      const stack = await createStack(t.p, { name: 'decommission' });
      const s = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
      await perceive(t.p, { sleeveId: s.id, text: 'one' });
      await perceive(t.p, { sleeveId: s.id, text: 'two', stackId: stack.id });
      const held = await balanceOf(prisma(), sleeveAccount(s.id));
      expect(held.compute).toBe(999);
      const poolBefore = await balanceOf(prisma(), poolAccount(stack.id));

      // The sleeve's stack is known since its spawn (it never changes): no read of it first.
      const r = await countStatements(t.p.db, () => decommissionSleeve(t.p, s.id, 'done here'));
      expect({ prisma: r.prisma, driver: r.driver }).toEqual({ prisma: 0, driver: 1 });
      const row = await prisma().sleeve.findUniqueOrThrow({ where: { id: s.id } });
      expect(row).toMatchObject({ alive: false, frozen: false, decommissionWhy: 'done here', chainStatus: 'pending', finalTokens: held });
      expect(row.decommissionedAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);
      expect(r.value).toEqual(await getSleeveView(t.p, s.id));
      expect(r.value.tokens).toEqual(held);
      expect(await prisma().keyLease.findUniqueOrThrow({ where: { sleeveId: s.id } })).toMatchObject({ active: false });

      // Every token it held is in the pool now, by one balanced posting.
      const left = await balanceOf(prisma(), sleeveAccount(s.id));
      for (const token of Object.keys(held) as Token[]) expect(left[token]).toBe(0);
      const pool = await balanceOf(prisma(), poolAccount(stack.id));
      for (const token of Object.keys(held) as Token[]) expect(pool[token]).toBe(poolBefore[token] + held[token]);
      const entries = await entriesOf(s.id, 'decommission');
      expect(new Set(entries.map((e) => e.txId)).size).toBe(1);
      expect(entries.map((e) => [e.account, e.token, e.milli])).toEqual([
        ...(['compute', 'memory', 'routing', 'sync'] as Token[]).map((k) => [sleeveAccount(s.id), k, -toMilli(held[k])]),
        ...(['compute', 'memory', 'routing', 'sync'] as Token[]).map((k) => [poolAccount(stack.id), k, toMilli(held[k])]),
      ]);

      const intents = await prisma().chainOutbox.findMany({ where: { ref: s.id, kind: 'decommissionSleeve' } });
      expect(intents.map((i) => [i.payload, i.epoch])).toEqual([[{ sleeveId: s.id, stackId: stack.id, reason: 'done here' }, 4]]);
      const events = await prisma().eventOutbox.findMany({ where: { msgId: `sleeve-decommissioned:${s.id}` } });
      expect(events.map((e) => [e.subject, e.data])).toEqual([
        [
          `cog.sleeve.decommissioned.${stack.id}`,
          expect.objectContaining({ type: 'sleeve.decommissioned', stackId: stack.id, sleeveId: s.id, kind: 'ai', reason: 'done here' }),
        ],
      ]);
    });

    it('a decommission of a dead sleeve is a 409 and of an unknown one a 404, and they leave nothing', async () => {
      const stack = await createStack(t.p, { name: 'decommission-twice' });
      const s = await spawnSleeve(t.p, { stackId: stack.id, kind: 'human', shape: 'B' });
      await decommissionSleeve(t.p, s.id, 'first');
      const before = {
        ...(await counts()),
        pool: await balanceOf(prisma(), poolAccount(stack.id)),
        row: await prisma().sleeve.findUniqueOrThrow({ where: { id: s.id } }),
      };
      await expect(decommissionSleeve(t.p, s.id, 'again')).rejects.toMatchObject({ status: 409, code: 'SLEEVE_DECOMMISSIONED' });
      await expect(decommissionSleeve(t.p, 'sleeve:0x0000000000000000000000000000000000000000', 'who')).rejects.toMatchObject({ status: 404 });
      expect({
        ...(await counts()),
        pool: await balanceOf(prisma(), poolAccount(stack.id)),
        row: await prisma().sleeve.findUniqueOrThrow({ where: { id: s.id } }),
      }).toEqual(before);
    });

    it('writes racing a decommission: every token is burned by a write that went through or swept to the pool', async () => {
      const stack = await createStack(t.p, { name: 'decommission-race' });
      const s = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
      const writes = Array.from({ length: 40 }, (_, i) => perceive(t.p, { sleeveId: s.id, stackId: stack.id, text: `w${i}` }));
      const gone = decommissionSleeve(t.p, s.id, 'race');
      const results = await Promise.allSettled(writes);
      await gone;
      const wrote = results.filter((x) => x.status === 'fulfilled').length;
      for (const x of results) if (x.status === 'rejected') expect(x.reason).toMatchObject({ status: 409 });
      const row = await prisma().sleeve.findUniqueOrThrow({ where: { id: s.id } });
      const pool = await balanceOf(prisma(), poolAccount(stack.id));
      expect((await balanceOf(prisma(), sleeveAccount(s.id))).compute).toBe(0);
      expect((row.finalTokens as { compute: number }).compute).toBe(pool.compute);
      expect(pool.compute + wrote * 0.5).toBe(1000);
    });
  });
}
