// Memory through REST: perceive (both forms), remember, recall (both shapes), the rules on costs,
// drift, encryption, gating, fidelity and the residue; and 50 concurrent perceives on one stack.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { epochKey, fromUtf8, open } from '../lib/crypto.ts';
import { memoryTestApp, type MemoryTestApp } from './helpers/memory-app.ts';
import { stackMasterSecret } from '../subgraphs/stacks/stacks.ts';
import { computeCid } from '../subgraphs/memory/hippocampus/cid.ts';
import { startDhf } from '../subgraphs/memory/dhf/service.ts';
import { pinNode } from '../flows/memory.ts';
import { mergeBranch, openBranches } from '../subgraphs/memory/memory.ts';

let t: MemoryTestApp;
beforeAll(async () => {
  t = await memoryTestApp({ DHF_PORT: '0' });
});
afterAll(async () => t?.close());

const inject = async (method: string, url: string, payload?: unknown) => {
  const res = await t.app.inject({ method: method as never, url, payload: payload as never });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
};
const enc = encodeURIComponent;
async function stackWith(kinds: Array<'A' | 'B'>) {
  const stack = (await inject('POST', '/v1/stacks', { name: 'mem' })).body;
  const sleeves = [];
  for (const k of kinds) {
    sleeves.push(
      k === 'A'
        ? (await inject('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'human' })).body
        : (await inject('POST', `/v1/sleeves/${enc(stack.id)}`, { kind: 'ai' })).body,
    );
  }
  return { stack, sleeves };
}
const readStack = async (id: string) => (await inject('GET', `/v1/stacks/${enc(id)}`)).body;
const readSleeve = async (id: string) => (await inject('GET', `/v1/sleeves/${enc(id)}`)).body;

describe('perceive', () => {
  it('Shape A: encrypts under the epoch key, links to the head, costs 0.5 compute, drift +1, publishes', async () => {
    t.p.setEpoch(5);
    const {
      stack,
      sleeves: [s],
    } = await stackWith(['A']);
    const events: Array<Record<string, unknown>> = [];
    const sub = await t.p.bus.subscribe({ subjects: [`cog.perceive.${stack.id}`] }, (d) => void events.push(d.data));
    const { startEventRelay } = await import('../lib/events.ts');
    const relay = startEventRelay(t.p, { pollMs: 50 });

    const r1 = await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: 'first light' });
    expect(r1.status).toBe(200);
    expect(r1.body.cid).toMatch(/^cog:\/\/[0-9a-f]{64}@5$/);
    expect(r1.body.thought).toBe(`human@${s.id.slice(-6)} first light`);
    const r2 = await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: 'second' });

    const st = await readStack(stack.id);
    expect(st.episodicHead).toBe(r2.body.cid);
    expect(st.epoch).toBe(5);
    const n2 = await t.p.db.prisma.memoryNode.findUniqueOrThrow({ where: { cid: r2.body.cid } });
    const n1 = await t.p.db.prisma.memoryNode.findUniqueOrThrow({ where: { cid: r1.body.cid } });
    expect(n2.links).toEqual([r1.body.cid]);
    expect(n1.links).toEqual([]);
    // the stored payload is ciphertext that opens with the per-epoch key, and addresses its CID
    const dag = await fetch(`${t.hippocampus.url}/dag/${enc(r1.body.cid)}?epoch=5`).then((x) => x.json() as Promise<any>);
    expect(JSON.stringify(dag)).not.toContain('first light');
    const row = await t.p.db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } });
    const key = epochKey(stackMasterSecret(t.p, row), stack.id, 5);
    expect(fromUtf8(open(key, dag.ciphertext))).toBe('first light');
    expect(computeCid({ data: JSON.stringify(dag.ciphertext), links: [], epoch: 5, stackId: stack.id })).toBe(r1.body.cid);

    const after = await readSleeve(s.id);
    expect(after.tokens.compute).toBe(249);
    expect(after.drift).toBe(2);
    await relay.flush();
    // Published; the bus delivers asynchronously (a loaded machine can take longer than a moment).
    await expect.poll(() => events.length, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(2);
    await new Promise((r) => setTimeout(r, 50));
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({ stackId: stack.id, sleeveId: s.id, cid: r1.body.cid, epoch: 5 });
    expect(JSON.stringify(events)).not.toContain('first light');
    await relay.close();
    await sub.close();
  });

  it('Shape B: {cid, epoch, cost}; refusals 400/402/403/404/409 change nothing', async () => {
    const {
      stack,
      sleeves: [s],
    } = await stackWith(['B']);
    const other = await stackWith(['A']);
    const r = await inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: 'b-form' });
    expect(r).toMatchObject({ status: 200, body: { epoch: 5, cost: { compute: 0.5 } } });
    expect(r.body.cid).toMatch(/^cog:\/\//);
    const head = (await readStack(stack.id)).episodicHead;
    const before = await readSleeve(s.id);
    const refusals: Array<[string, string, unknown, number]> = [
      ['POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: '' }, 400],
      ['POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: 'x'.repeat(65 * 1024) }, 400],
      ['POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id }, 400],
      ['POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: 7 }, 400],
      ['POST', '/v1/perceive', { stackId: other.stack.id, sleeveId: s.id, text: 'not mine' }, 403],
      ['POST', '/v1/perceive', { stackId: 'stack:none', sleeveId: s.id, text: 'x' }, 404],
      ['POST', '/v1/perceive', { stackId: stack.id, sleeveId: 'sleeve:none', text: 'x' }, 404],
      ['POST', `/v1/sleeves/${enc('sleeve:none')}/perceive`, { input: 'x' }, 404],
      ['POST', `/v1/sleeves/${enc(s.id)}/perceive`, {}, 400],
    ];
    for (const [m, u, b, status] of refusals) expect((await inject(m, u, b)).status, `${u} ${JSON.stringify(b).slice(0, 80)}`).toBe(status);
    const forbidden = await inject('POST', '/v1/perceive', { stackId: other.stack.id, sleeveId: s.id, text: 'x' });
    expect(forbidden.body.code).toBe('SLEEVE_NOT_OF_STACK');
    // too little compute: 402 with the amounts
    await t.p.db.prisma.balance.update({ where: { account_token: { account: `sleeve:${s.id}`, token: 'compute' } }, data: { milli: 400n } });
    const poor = await inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: 'x' });
    expect(poor).toMatchObject({ status: 402, body: { token: 'compute', required: 0.5, available: 0.4 } });
    const now = await readSleeve(s.id);
    expect(now.drift).toBe(before.drift);
    expect((await readStack(stack.id)).episodicHead).toBe(head);
    // frozen and decommissioned sleeves: 409
    await t.p.db.prisma.sleeve.update({ where: { id: s.id }, data: { frozen: true } });
    expect((await inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: 'x' })).status).toBe(409);
    await t.p.db.prisma.sleeve.update({ where: { id: s.id }, data: { frozen: false } });
    await inject('DELETE', `/v1/sleeves/${enc(s.id)}`);
    expect((await inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: s.id, text: 'x' })).status).toBe(409);
    expect((await readStack(stack.id)).episodicHead).toBe(head);
  });

  it('50 concurrent perceives from two sleeves are all reachable from the head, each linked once', async () => {
    const {
      stack,
      sleeves: [a, b],
    } = await stackWith(['A', 'B']);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => inject('POST', '/v1/perceive', { stackId: stack.id, sleeveId: i % 2 ? a.id : b.id, text: `p${i}` })),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    const cids = new Set(results.map((r) => r.body.cid));
    expect(cids.size).toBe(50);
    const nodes = await t.p.db.prisma.memoryNode.findMany({ where: { stackId: stack.id } });
    const byCid = new Map(nodes.map((n) => [n.cid, n]));
    const linkedBy = new Map<string, number>();
    for (const n of nodes) for (const l of n.links) linkedBy.set(l, (linkedBy.get(l) ?? 0) + 1);
    expect([...linkedBy.values()].every((v) => v === 1)).toBe(true);
    let cur: string | undefined = (await readStack(stack.id)).episodicHead;
    const chain: string[] = [];
    while (cur) chain.push(cur), (cur = byCid.get(cur)!.links[0]);
    expect(new Set(chain)).toEqual(cids);
    // the full chain decrypts in a recall, newest first
    const rec = await inject('POST', '/v1/recall', { stackId: stack.id, sleeveId: a.id, depth: 60 });
    expect(rec.body).toMatchObject({ broken: 0, fidelity: 1, cost: { memory: 50 } });
    expect(rec.body.fragments.map((f: { cid: string }) => f.cid)).toEqual(chain);
    // co-resident writes in one epoch were recorded as shadow branches, all still reachable
    const branches = await t.p.db.prisma.memoryBranch.findMany({ where: { stackId: stack.id } });
    expect(branches.length).toBeGreaterThan(0);
    for (const br of branches) expect(cids.has(br.headCid)).toBe(true);
  });
});

describe('remember and recall', () => {
  it('remember (stack and sleeve forms) moves the head; pin costs 1 memory and survives gating', async () => {
    t.p.setEpoch(10);
    const {
      stack,
      sleeves: [s],
    } = await stackWith(['A']);
    const r1 = await inject('POST', `/v1/stacks/${enc(stack.id)}/remember`, { text: 'keep me', pin: true });
    expect(r1.status).toBe(200);
    expect(Object.keys(r1.body)).toEqual(['cid']);
    expect((await readStack(stack.id)).episodicHead).toBe(r1.body.cid);
    expect((await readSleeve(s.id)).tokens.memory).toBe(249);
    const r2 = await inject('POST', `/v1/sleeves/${enc(s.id)}/remember`, { text: 'loose', pin: false });
    expect((await readStack(stack.id)).episodicHead).toBe(r2.body.cid);
    expect((await readSleeve(s.id)).tokens.memory).toBe(249);
    expect((await t.p.db.prisma.memoryNode.findUniqueOrThrow({ where: { cid: r1.body.cid } })).pinned).toBe(true);
    expect((await inject('POST', `/v1/stacks/${enc(stack.id)}/remember`, { text: 'x', pin: 'yes' })).status).toBe(400);
    const lonely = (await inject('POST', '/v1/stacks', { name: 'lonely' })).body;
    expect((await inject('POST', `/v1/stacks/${enc(lonely.id)}/remember`, { text: 'x', pin: false })).status).toBe(409);
    expect((await inject('POST', '/v1/stacks/stack:none/remember', { text: 'x', pin: false })).status).toBe(404);

    // within the window both read back
    const a = await inject('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=5`);
    expect(a.body.fidelity).toBe(1);
    expect(a.body.fragments.map((f: { cid: string }) => f.cid)).toEqual([r2.body.cid, r1.body.cid]);
    expect(a.body.fragments[1]).toMatchObject({ kind: 'episodic', pinned: true, stackId: stack.id, links: [], epoch: 10 });
    expect(a.body.fragments[1].ciphertext).toMatchObject({ v: 1 });
    // three epochs later the unpinned node is gated (broken), the pinned one still reads
    t.p.setEpoch(13);
    const b = await inject('POST', '/v1/recall', { stackId: stack.id, sleeveId: s.id, depth: 5 });
    expect(b.body).toMatchObject({ broken: 1, fidelity: 0.5, cost: { memory: 2 } });
    expect(b.body.fragments).toEqual([{ cid: r1.body.cid, text: 'keep me', epoch: 10 }]);
    // fidelity 0.5 < 0.6: one historical-non-canonical residue for this head and epoch
    const res = await t.p.db.prisma.residue.findMany({ where: { stackId: stack.id, kind: 'historical-non-canonical' } });
    expect(res).toHaveLength(1);
    await inject('POST', '/v1/recall', { stackId: stack.id, sleeveId: s.id, depth: 5 });
    expect(await t.p.db.prisma.residue.count({ where: { stackId: stack.id, kind: 'historical-non-canonical' } })).toBe(1);
  });

  it('recall: effective depth = min(depth, memoryToken, balance); 1 memory per level; drift +0.1', async () => {
    t.p.setEpoch(20);
    const {
      stack,
      sleeves: [s],
    } = await stackWith(['A']);
    for (let i = 0; i < 6; i++) await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: `m${i}` });
    const d0 = (await readSleeve(s.id)).drift;
    const a = await inject('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=4`);
    expect(a.body.fragments).toHaveLength(4);
    expect(a.body.broken).toEqual([]);
    let sl = await readSleeve(s.id);
    expect(sl.tokens.memory).toBe(246);
    expect(sl.drift).toBeCloseTo(d0 + 0.1, 10);
    const b = await inject('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=10&memoryToken=2`);
    expect(b.body.fragments).toHaveLength(2);
    await t.p.db.prisma.balance.update({ where: { account_token: { account: `sleeve:${s.id}`, token: 'memory' } }, data: { milli: 3_500n } });
    const c = await inject('POST', '/v1/recall', { stackId: stack.id, depth: 100 });
    expect(c.body).toMatchObject({ fidelity: 1, cost: { memory: 3 } });
    expect(c.body.fragments.map((f: { text: string }) => f.text)).toEqual(['m5', 'm4', 'm3']);
    sl = await readSleeve(s.id);
    expect(sl.tokens.memory).toBe(0.5);
    // no memory left: depth 0, nothing walked, nothing charged
    const d = await inject('POST', '/v1/recall', { stackId: stack.id, depth: 3 });
    expect(d.body).toEqual({ fragments: [], broken: 0, fidelity: 1, cost: { memory: 0 } });
    for (const q of ['depth=0', 'depth=abc', 'depth=1.5', 'depth=10001', 'depth=2&memoryToken=-1', '']) {
      expect((await inject('GET', `/v1/stacks/${enc(stack.id)}/recall?${q}`)).status, q).toBe(400);
    }
    expect((await inject('POST', '/v1/recall', { stackId: stack.id, depth: '3' })).status).toBe(400);
    expect((await inject('POST', '/v1/recall', { stackId: 'stack:none', depth: 3 })).status).toBe(404);
    const other = await stackWith(['A']);
    expect((await inject('POST', '/v1/recall', { stackId: stack.id, sleeveId: other.sleeves[0].id, depth: 3 })).status).toBe(403);
    // a stack without sleeves recalls nothing
    const bare = (await inject('POST', '/v1/stacks', { name: 'bare' })).body;
    expect((await inject('GET', `/v1/stacks/${enc(bare.id)}/recall?depth=3`)).body).toEqual({ fragments: [], broken: [], fidelity: 1 });
  });

  it('decommission keeps the head and pinned shards readable by a new sleeve', async () => {
    t.p.setEpoch(30);
    const {
      stack,
      sleeves: [s],
    } = await stackWith(['A']);
    const pinned = (await inject('POST', `/v1/sleeves/${enc(s.id)}/remember`, { text: 'shard', pin: true })).body.cid;
    await inject('DELETE', `/v1/sleeves/${enc(s.id)}`);
    expect((await readStack(stack.id)).episodicHead).toBe(pinned);
    t.p.setEpoch(40);
    const fresh = (await inject('POST', '/v1/sleeves', { stackId: stack.id, embodimentType: 'memory' })).body;
    const r = await inject('POST', '/v1/recall', { stackId: stack.id, sleeveId: fresh.id, depth: 2 });
    expect(r.body.fragments).toEqual([{ cid: pinned, text: 'shard', epoch: 30 }]);
  });
});

describe('DHF compositor', () => {
  it('reconstructs through the sleeve key lease without charging tokens or drift', async () => {
    const dhf = await startDhf(t.p);
    try {
      t.p.setEpoch(50);
      const {
        stack,
        sleeves: [s, dead],
      } = await stackWith(['A', 'A']);
      await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: 'one' });
      await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: 'two' });
      await inject('DELETE', `/v1/sleeves/${enc(dead.id)}`);
      const before = await readSleeve(s.id);
      const post = (body: unknown) =>
        fetch(`${dhf.url}/v1/reconstruct`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as any,
        }));
      const r = await post({ stackId: stack.id, sleeveId: s.id, depth: 10 });
      expect(r.status).toBe(200);
      expect(r.body.ok).toBe(true);
      expect(r.body.fidelity).toBe(1);
      expect(r.body.broken).toEqual([]);
      expect(r.body.fragments.map((f: { text: string }) => f.text)).toEqual(['two', 'one']);
      const after = await readSleeve(s.id);
      expect(after.tokens).toEqual(before.tokens);
      expect(after.drift).toBe(before.drift);
      t.p.setEpoch(53);
      const gated = await post({ stackId: stack.id, sleeveId: s.id, depth: 10 });
      expect(gated.body).toMatchObject({ ok: true, fragments: [], fidelity: 0 });
      expect(gated.body.broken).toHaveLength(2);
      const other = await stackWith(['A']);
      expect((await post({ stackId: stack.id, sleeveId: other.sleeves[0].id, depth: 3 })).status).toBe(403);
      expect((await post({ stackId: stack.id, sleeveId: dead.id, depth: 3 })).status).toBe(409);
      expect((await post({ stackId: stack.id, sleeveId: s.id, depth: 0 })).status).toBe(400);
      expect((await post({ stackId: 'stack:none', sleeveId: s.id, depth: 3 })).status).toBe(404);
      expect((await post({ stackId: stack.id })).status).toBe(400);
    } finally {
      await dhf.close();
    }
  });
});

describe('shadow branches and pins', () => {
  it('records a branch when a co-resident sleeve writes over an unseen head in the same epoch; merge closes it', async () => {
    t.p.setEpoch(60);
    const {
      stack,
      sleeves: [a, b],
    } = await stackWith(['A', 'A']);
    const pa = (n: string) => inject('POST', `/v1/sleeves/${enc(a.id)}/perceive`, { input: n });
    const pb = (n: string) => inject('POST', `/v1/sleeves/${enc(b.id)}/perceive`, { input: n });
    const a1 = (await pa('a1')).body.cid;
    expect(await openBranches(t.p.db.prisma, stack.id)).toHaveLength(0);
    const wrote = await pb('b1'); // b last saw null, a moved the head this epoch
    expect(wrote.status, JSON.stringify(wrote.body)).toBe(200);
    const b1 = wrote.body.cid;
    const [br] = await openBranches(t.p.db.prisma, stack.id);
    expect(br).toMatchObject({ sleeveId: b.id, baseCid: null, headCid: b1, status: 'open' });
    await pb('b2'); // b's own head: no branch
    expect(await openBranches(t.p.db.prisma, stack.id)).toHaveLength(1);
    await inject('GET', `/v1/stacks/${enc(stack.id)}/recall?depth=1&memoryToken=1`); // a (richest) reads the head: seen
    t.p.setEpoch(61);
    await pa('a2'); // next epoch: no branch
    expect(await openBranches(t.p.db.prisma, stack.id)).toHaveLength(1);
    const merged = await mergeBranch(t.p, br.id);
    expect(merged).toMatchObject({ status: 'merged', mergedCid: (await readStack(stack.id)).episodicHead });
    await expect(mergeBranch(t.p, br.id)).rejects.toMatchObject({ status: 409 });
    await expect(mergeBranch(t.p, 'branch:none')).rejects.toMatchObject({ status: 404 });
    expect(await openBranches(t.p.db.prisma, stack.id)).toHaveLength(0);
    expect(a1).toBeTruthy();
  });

  it("pinNode charges 1 memory once, only for a sleeve of the node's stack", async () => {
    t.p.setEpoch(70);
    const {
      sleeves: [s],
    } = await stackWith(['A']);
    const other = await stackWith(['A']);
    const cid = (await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: 'pin me' })).body.cid;
    expect(await pinNode(t.p, cid, s.id)).toEqual({ cid, pinned: true, cost: { memory: 1 } });
    expect(await pinNode(t.p, cid, s.id)).toEqual({ cid, pinned: true, cost: { memory: 0 } });
    expect((await readSleeve(s.id)).tokens.memory).toBe(249);
    await expect(pinNode(t.p, cid, other.sleeves[0].id)).rejects.toMatchObject({ status: 403 });
    await expect(pinNode(t.p, 'cog://' + '0'.repeat(64) + '@1', s.id)).rejects.toMatchObject({ status: 404 });
    t.p.setEpoch(80);
    const r = await inject('POST', '/v1/recall', { stackId: s.stackId, sleeveId: s.id, depth: 1 });
    expect(r.body.fragments).toEqual([{ cid, text: 'pin me', epoch: 70 }]);
    // The same over REST: POST /v1/sleeves/:id/pin charges the sleeve (the spec's pin costs memory).
    const cid2 = (await inject('POST', `/v1/sleeves/${enc(s.id)}/perceive`, { input: 'pin me too' })).body.cid;
    const before = (await readSleeve(s.id)).tokens.memory;
    const pinned = await inject('POST', `/v1/sleeves/${enc(s.id)}/pin`, { cid: cid2 });
    expect([pinned.status, pinned.body]).toEqual([200, { cid: cid2, pinned: true, cost: { memory: 1 } }]);
    expect((await readSleeve(s.id)).tokens.memory).toBe(before - 1);
    expect((await inject('POST', `/v1/sleeves/${enc(other.sleeves[0].id)}/pin`, { cid: cid2 })).status).toBe(403);
    expect((await inject('POST', `/v1/sleeves/${enc(s.id)}/pin`, {})).status).toBe(400);
    expect((await readSleeve(s.id)).tokens.memory).toBe(before - 1);
  });
});
