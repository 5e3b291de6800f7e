// The stored chain (MemoryNode.chainPos, set by the insert trigger) and the walk over it: a walk
// from a chained head is one index range, and gives exactly what the recursive walk over the links
// gives, also with a fork beside the line, a merge node, a pruned node and nodes of another stack.
// On PGlite and on PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from '../../../test/helpers/platform.ts';
import { fromUtf8, open, randomSecret, seal } from '../../../lib/crypto.ts';
import { computeCid } from './cid.ts';
import { indexNodesPart, putNode, walkDag, type PutNodeInput, type WalkResult } from './store.ts';
import { runStatement } from '../../../lib/db/statement.ts';
import { freshDatabase } from '../../../test/helpers/postgres.ts';

let p: TestPlatform;

const key = randomSecret(32);
async function put(text: string, links: string[] = [], stackId = 'stack:chain', epoch = 3): Promise<string> {
  const data = JSON.stringify(seal(key, text));
  const cid = computeCid({ data, links, epoch, stackId });
  await putNode(p.db.prisma, p.objects, { cid, data, links, epoch, stackId, pinned: true }, 3);
  return cid;
}
const pos = async (cid: string) => (await p.db.prisma.memoryNode.findUnique({ where: { cid } }))?.chainPos ?? null;
const shape = (w: WalkResult) => ({ nodes: w.nodes.map((n) => n.cid), gated: w.gated, missing: w.missing, levels: w.levels });

/** What the walk must give: the breadth-first walk over the links, computed here from the rows. */
async function expected(root: string, depth: number): Promise<ReturnType<typeof shape>> {
  const rows = new Map((await p.db.prisma.memoryNode.findMany()).map((r) => [r.cid, r]));
  const out = { nodes: [] as string[], gated: [] as string[], missing: [] as string[], levels: 0 };
  const seen = new Set([root]);
  let level = [root];
  while (level.length && out.levels < depth) {
    out.levels++;
    const found = level.filter((c) => rows.has(c) || (out.missing.push(c), false)).map((c) => rows.get(c)!);
    found.sort((a, b) => b.epoch - a.epoch || (b.writeSeq > a.writeSeq ? 1 : -1));
    const next: string[] = [];
    for (const r of found) {
      out.nodes.push(r.cid);
      for (const l of r.links) if (!seen.has(l)) seen.add(l), next.push(l);
    }
    level = next;
  }
  return out;
}

for (const engine of ['pglite', 'postgres'] as const)
  describe(`the stored chain on ${engine}`, () => {
    let drop: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      const fresh = engine === 'postgres' ? await freshDatabase() : undefined;
      drop = fresh?.drop;
      p = await testPlatform(fresh ? { DATABASE_URL: fresh.url } : {});
      p.setEpoch(3);
    });
    afterAll(async () => {
      await p?.cleanup();
      await drop?.();
    });

    it('positions every single-link node of a stack and walks it as the links do', async () => {
      const line = [await put('n0')];
      for (let i = 1; i < 30; i++) line.push(await put(`n${i}`, [line[i - 1]!]));
      expect(await Promise.all(line.map(pos))).toEqual(line.map((_, i) => i + 1));
      const head = line.at(-1)!;
      for (const depth of [1, 2, 10, 30, 31, 500]) {
        const w = await walkDag(p.db, p.objects, head, depth, 3);
        expect(shape(w)).toEqual(await expected(head, depth));
        expect(w.nodes.map((n) => n.cid)).toEqual(line.slice(-Math.min(depth, 30)).reverse());
      }

      // A fork beside the line (same position as line[20]) is not on the head's walk.
      const fork = await put('fork', [line[19]!]);
      expect(await pos(fork)).toBe(21);
      expect(shape(await walkDag(p.db, p.objects, head, 30, 3))).toEqual(await expected(head, 30));
      expect((await walkDag(p.db, p.objects, fork, 5, 3)).nodes.map((n) => n.cid)).toEqual([fork, ...line.slice(15, 19 + 1).reverse()].slice(0, 5));

      // A merge has no position (nor anything above it): its walk follows the links.
      const merge = await put('merge', [head, fork]);
      const above = await put('above', [merge]);
      expect([await pos(merge), await pos(above)]).toEqual([null, null]);
      for (const depth of [1, 3, 40]) expect(shape(await walkDag(p.db, p.objects, above, depth, 3))).toEqual(await expected(above, depth));

      // A link to another stack's node, or to an unknown one, gives no position.
      expect(await pos(await put('foreign', [line[3]!], 'stack:other'))).toBeNull();
      expect(await pos(await put('dangling', ['cog://' + 'a'.repeat(64) + '@3']))).toBeNull();
    });

    it('a pruned node in the line is missing, as in the walk over the links', async () => {
      const line = [await put('m0')];
      for (let i = 1; i < 10; i++) line.push(await put(`m${i}`, [line[i - 1]!]));
      await p.db.prisma.memoryNode.delete({ where: { cid: line[5]! } });
      const head = line.at(-1)!;
      const w = await walkDag(p.db, p.objects, head, 10, 3);
      expect(shape(w)).toEqual(await expected(head, 10));
      expect(w.missing).toEqual([line[5]]);
      expect(w.levels).toBe(5);
    });

    it('nodes inserted in one statement are chained in order', async () => {
      const a = await put('batch-root');
      const mk = (text: string, links: string[]) => {
        const data = JSON.stringify(seal(key, text));
        return { cid: computeCid({ data, links, epoch: 3, stackId: 'stack:chain' }), stackId: 'stack:chain', epoch: 3, links, size: data.length };
      };
      const b = mk('b', [a]);
      const c = mk('c', [b.cid]);
      await p.db.prisma.memoryNode.createMany({ data: [b, c] });
      expect([await pos(a), await pos(b.cid), await pos(c.cid)]).toEqual([1, 2, 3]);
    });

    it("a write's runs get their positions in its statement, as the trigger would give them", async () => {
      const node = (text: string, links: string[], stackId = 'stack:runs'): PutNodeInput => {
        const data = JSON.stringify(seal(key, text));
        return { cid: computeCid({ data, links, epoch: 3, stackId }), data, links, epoch: 3, stackId };
      };
      const insert = (nodes: PutNodeInput[]) => runStatement(p.db, [indexNodesPart(nodes)!]);
      // A run from nothing, then a run onto its head, two stacks interleaved in one statement.
      const r1 = [node('r0', [])];
      for (let i = 1; i < 5; i++) r1.push(node(`r${i}`, [r1[i - 1]!.cid]));
      await insert(r1);
      expect(await Promise.all(r1.map((n) => pos(n.cid)))).toEqual([1, 2, 3, 4, 5]);
      const other = [node('o0', [], 'stack:runs2')];
      const r2: PutNodeInput[] = [];
      let prev = r1.at(-1)!.cid;
      for (let i = 0; i < 4; i++) {
        r2.push(node(`s${i}`, [prev]));
        prev = r2.at(-1)!.cid;
        other.push(node(`o${i + 1}`, [other.at(-1)!.cid], 'stack:runs2'));
      }
      await insert(r2.flatMap((n, i) => [n, other[i]!]).concat(other.at(-1)!));
      expect(await Promise.all(r2.map((n) => pos(n.cid)))).toEqual([6, 7, 8, 9]);
      expect(await Promise.all(other.map((n) => pos(n.cid)))).toEqual([1, 2, 3, 4, 5]);
      // Onto a node without a position (a merge), and a merge itself: no position, as the trigger gives.
      const merge = node('m', [r2.at(-1)!.cid, other.at(-1)!.cid]);
      const onMerge = node('after m', [merge.cid]);
      // Onto another stack's node: a new run whose base is foreign, no position.
      const foreign = node('f', [other.at(-1)!.cid]);
      await insert([merge, onMerge, node('after after m', [onMerge.cid]), foreign]);
      expect([await pos(merge.cid), await pos(onMerge.cid), await pos(foreign.cid)]).toEqual([null, null, null]);
      // The walk from the head of the first stack is the one range, as over the links.
      const head = r2.at(-1)!.cid;
      const w = await walkDag(p.db, p.objects, head, 20, 3);
      expect(shape(w)).toEqual(await expected(head, 20));
      expect(w.nodes.map((n) => n.cid)).toEqual([...r1, ...r2].map((n) => n.cid).reverse());
    });

    it('reads back a walk longer than a chunk of rows, rows in the object store among them, and a stackId holding separators, quotes and backslashes, over the chain and over the links', async () => {
      // The walk's rows come back as text chunks of 100 rows, fields and rows split by control
      // characters (store.ts, WALK_ROW): a stackId is the one field a client chooses freely.
      const stackId = 'stack:"odd\x1e\x1f\\ \u00e9\n';
      const node = (text: string, links: string[]): PutNodeInput => {
        const data = JSON.stringify(seal(key, text));
        return { cid: computeCid({ data, links, epoch: 3, stackId }), data, links, epoch: 3, stackId, pinned: true };
      };
      const line: PutNodeInput[] = [];
      for (let i = 0; i < 250; i++) {
        const n = node(`long ${i}`, i ? [line[i - 1]!.cid] : []);
        line.push(n);
        // Every tenth node PUT through the Hippocampus (payload in the object store), the rest in its row.
        if (i % 10 === 7) await putNode(p.db.prisma, p.objects, n, 3);
        else await runStatement(p.db, [indexNodesPart([n])!]);
      }
      expect(await pos(line.at(-1)!.cid)).toBe(250);
      const texts = (w: WalkResult) => w.nodes.map((n) => fromUtf8(open(key, n.ciphertext!)));
      const head = line.at(-1)!.cid;
      for (const depth of [99, 100, 101, 250]) {
        const w = await walkDag(p.db, p.objects, head, depth, 3);
        expect(shape(w)).toEqual(await expected(head, depth));
        expect(w.nodes.every((n) => n.stackId === stackId && n.pinned && n.epoch === 3 && n.kind === 'episodic')).toBe(true);
        expect(texts(w)).toEqual(line.slice(-depth).map((_, i) => `long ${249 - i}`));
      }
      // A merge above the line, also linking a node of another stack: no position, so the walk is
      // the recursive query over the links, whose chunks are per stack.
      const plain = await put('of a plain stack', [], 'stack:plain');
      const merge = node('merge of the long line', [head, line[100]!.cid, plain]);
      await runStatement(p.db, [indexNodesPart([merge])!]);
      expect(await pos(merge.cid)).toBeNull();
      const w = await walkDag(p.db, p.objects, merge.cid, 260, 3);
      expect(shape(w)).toEqual(await expected(merge.cid, 260));
      const textOf = new Map([
        [merge.cid, 'merge of the long line'],
        [plain, 'of a plain stack'],
        ...line.map((n, i): [string, string] => [n.cid, `long ${i}`]),
      ]);
      expect(texts(w)).toEqual(w.nodes.map((n) => textOf.get(n.cid)));
      expect(w.nodes).toHaveLength(252);
      expect(w.nodes.filter((n) => n.stackId !== stackId).map((n) => [n.cid, n.stackId])).toEqual([[plain, 'stack:plain']]);
      expect(w.nodes.find((n) => n.cid === head)!.links).toEqual([line[248]!.cid]);
    });
  });
