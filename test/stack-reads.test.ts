// The read of one stack in one statement (flows/stack-reads.ts readStackView) against the read it
// replaced (stackView: the contexts' reads one by one), on PGlite and PostgreSQL: the same view, with
// alive and decommissioned sleeves, balances, and anchors over its write epochs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestAppOn, type MemoryTestApp } from './helpers/memory-app.ts';
import { readStackView, stackView } from '../flows/stack-reads.ts';
import { perceive } from '../flows/memory.ts';
import { decommissionSleeve } from '../subgraphs/sleeves/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';

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
  });
}
