// The read of one stack in one statement (flows/stack-reads.ts readStackView) against the read it
// replaced (stackView: the contexts' reads one by one), on PGlite and PostgreSQL: the same view, with
// alive and decommissioned sleeves, balances, and anchors over its write epochs; and the anchors'
// write epochs kept in a table of their own (inserts and deletes of nodes, by any statement) and read
// as one index range, whatever the stack's history.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { readStackView, stackView } from '../flows/stack-reads.ts';
import { perceive } from '../flows/memory.ts';
import { decommissionSleeve } from '../subgraphs/sleeves/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';
import { indexNodesPart, pruneForgotten, writeEpochsOf, writeEpochsSql } from '../subgraphs/memory/index.ts';
import { putNode } from '../subgraphs/memory/hippocampus/store.ts';
import { computeDataCid } from '../subgraphs/memory/hippocampus/cid.ts';
import { runStatement } from '../lib/db/statement.ts';
import { createHash } from 'node:crypto';
import { sql } from '../lib/db/index.ts';

const hex = (n: number) => n.toString(16).padStart(64, '0');

for (const db of ['pglite', 'postgres'] as const) {
  describe(`a stack read in one statement on ${db}`, () => {
    let t: MemoryTestApp;
    beforeAll(async () => {
      t = await memoryTestAppOn(db);
    }, 120_000);
    afterAll(async () => {
      await t?.close();
    });

    it('is the view the contexts read one by one gave, and a 404 for an unknown stack', async () => {
      const inject = async (method: string, url: string, payload?: unknown) =>
        JSON.parse((await t.app.inject({ method: method as never, url, payload: payload as never })).body);
      const stack = await inject('POST', '/v1/stacks', { name: 'reads' });
      const [a, b, c] = [
        await inject('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'ai' }),
        await inject('POST', `/v1/sleeves/${encodeURIComponent(stack.id)}`, { kind: 'human' }),
        await inject('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'memory' }),
      ];
      // Writes over three epochs, two of them folded into anchors; one sleeve decommissioned.
      for (const e of [4, 5, 6]) {
        t.p.setEpoch(e);
        await perceive(t.p, { sleeveId: a.id, text: `in ${e}` });
        await perceive(t.p, { sleeveId: b.id, text: `also in ${e}` });
      }
      for (const e of [4, 5])
        await t.p.db.prisma.epochAnchor.create({
          data: {
            epoch: e,
            crossRoot: hex(e),
            evmRoot: hex(100 + e),
            ipfsRoot: hex(200 + e),
            sleevesRoot: hex(300 + e),
            btcRoot: hex(400 + e),
            operator: 'op',
            signature: 'sig',
            gaps: [],
          },
        });
      await decommissionSleeve(t.p, c.id, 'test');
      const one = await readStackView(t.p, stack.id);
      const composed = await stackView(t.p, await getStackRow(t.p.db.prisma, stack.id));
      expect(one).toEqual(composed);
      expect(one.sleeves.map((s) => s.alive)).toEqual([true, true, false]);
      expect(one.anchors.map((x) => x.epoch)).toEqual([5, 4]);
      expect(one.balances.compute).toBeGreaterThan(0);
      // Through the REST route too.
      expect(await inject('GET', `/v1/stacks/${encodeURIComponent(stack.id)}`)).toEqual(JSON.parse(JSON.stringify(composed)));
      await expect(readStackView(t.p, 'stack:none')).rejects.toMatchObject({ status: 404 });
      expect((await t.app.inject({ method: 'GET', url: '/v1/stacks/stack:none' })).statusCode).toBe(404);
    }, 60_000);

    it('write epochs come with a Hippocampus put and go with the prune of their last node', async () => {
      const put = async (epoch: number, text: string, pinned = false) => {
        const n = { stackId: 'stack:put', epoch, links: [], data: text, pinned };
        expect(await putNode(t.p.db.prisma, t.p.objects, { ...n, cid: computeDataCid(n) }, epoch)).toEqual({ created: true });
      };
      t.p.setEpoch(2);
      await put(1, 'one');
      await put(2, 'two');
      await put(2, 'two, kept', true);
      const epochs = async () => (await writeEpochsOf(t.p.db.prisma, ['stack:put'], 10)).get('stack:put');
      expect(await epochs()).toEqual([2, 1]);
      // Past the retention window: epoch 1's only node goes, and so does the epoch; epoch 2 keeps its pinned node.
      t.p.setEpoch(3 + t.p.config.retentionEpochs);
      await pruneForgotten(t.p);
      expect(await t.p.db.prisma.memoryNode.count({ where: { stackId: 'stack:put' } })).toBe(1);
      expect(await epochs()).toEqual([2]);
    }, 60_000);

    it("a stack's newest write epochs: the same as over all its nodes, read as one index range of its own", async () => {
      // 2,000 nodes over 200 epochs for one stack, 300 over 30 for another, in bulk through the
      // write statement's part (which adds their write epochs).
      const bulk = (stackId: string, nodes: number, epochs: number) =>
        runStatement(t.p.db, [
          indexNodesPart(
            Array.from({ length: nodes }, (_, i) => {
              const g = i + 1;
              const cid = `cog://${createHash('sha256').update(`${stackId} ${g}`).digest('hex')}@${g % epochs}`;
              return { cid, stackId, epoch: g % epochs, links: [], data: 'x' };
            }),
          )!,
        ]);
      await bulk('stack:long', 2_000, 200);
      await bulk('stack:short', 300, 30);
      await t.p.db.prisma.$executeRaw(sql`ANALYZE "MemoryNode"`);
      await t.p.db.prisma.$executeRaw(sql`ANALYZE "MemoryWriteEpoch"`);
      const ids = ['stack:long', 'stack:short', 'stack:none', 'stack:long'];
      const overNodes = async (perStack: number) => {
        const all = await t.p.db.prisma.$queryRaw<Array<{ stackId: string; epoch: number }>>(
          sql`SELECT DISTINCT "stackId", epoch FROM "MemoryNode" WHERE "stackId" = ANY(${ids}::text[])`,
        );
        const want = new Map<string, number[]>(ids.map((id) => [id, []]));
        for (const r of all) want.get(r.stackId)!.push(r.epoch);
        for (const [id, es] of want) want.set(id, es.sort((a, b) => b - a).slice(0, perStack));
        return want;
      };
      for (const perStack of [0, 1, 7, 500]) expect(await writeEpochsOf(t.p.db.prisma, ids, perStack)).toEqual(await overNodes(perStack));
      // A delete takes an epoch out when its last node goes, not before: stack:short's epoch 29 loses
      // all its nodes but one (still listed), then that one too (gone); several statements and one.
      const newest = async () => (await writeEpochsOf(t.p.db.prisma, ['stack:short'], 2)).get('stack:short');
      expect(await newest()).toEqual([29, 28]);
      const cids = (
        await t.p.db.prisma.$queryRaw<{ cid: string }[]>(sql`SELECT cid FROM "MemoryNode" WHERE "stackId" = 'stack:short' AND epoch = 29 ORDER BY cid`)
      ).map((r) => r.cid);
      expect(cids.length).toBe(10);
      await t.p.db.prisma.$executeRaw(sql`DELETE FROM "MemoryNode" WHERE cid = ANY(${cids.slice(1)}::text[])`);
      expect(await newest()).toEqual([29, 28]);
      await t.p.db.prisma.$executeRaw(sql`DELETE FROM "MemoryNode" WHERE cid = ${cids[0]}`);
      expect(await newest()).toEqual([28, 27]);
      await t.p.db.prisma.$executeRaw(sql`DELETE FROM "MemoryNode" WHERE "stackId" = 'stack:short' AND epoch >= 27`);
      expect(await newest()).toEqual([26, 25]);
      for (const perStack of [1, 7, 500]) expect(await writeEpochsOf(t.p.db.prisma, ids, perStack)).toEqual(await overNodes(perStack));
      // The plan: no read of MemoryNode; MemoryWriteEpoch read by index, seven rows for seven epochs.
      const [explained] = await t.p.db.prisma.$queryRaw<{ 'QUERY PLAN': unknown }[]>(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${writeEpochsSql(['stack:long'], 7)}`);
      let rowsRead = 0;
      const kinds: string[] = [];
      const relations: string[] = [];
      const walk = (n: Record<string, unknown>) => {
        if (n['Relation Name']) relations.push(String(n['Relation Name']));
        if (n['Relation Name'] === 'MemoryWriteEpoch') {
          kinds.push(String(n['Node Type']));
          rowsRead += Number(n['Actual Rows']) * Number(n['Actual Loops']);
        }
        for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
      };
      const plan = explained!['QUERY PLAN'];
      walk((typeof plan === 'string' ? JSON.parse(plan) : (plan as { Plan: Record<string, unknown> }[]))[0].Plan);
      expect(relations).not.toContain('MemoryNode');
      expect(kinds.length).toBeGreaterThan(0);
      expect(kinds.every((k) => k.startsWith('Index'))).toBe(true);
      expect(rowsRead).toBeLessThanOrEqual(7);
    }, 60_000);
  });
}
