import { describe, it, expect, afterAll } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { memoryReconciler } from '../flows/worker-passes.ts';
import { putNode } from '../subgraphs/memory/hippocampus/store.ts';
import { computeDataCid } from '../subgraphs/memory/hippocampus/cid.ts';

let p: TestPlatform;
afterAll(() => p?.cleanup());

describe('memory-reconciler pass', () => {
  it('forgets unpinned nodes past the retention window and keeps pinned ones', async () => {
    p = await testPlatform({ COG_RETENTION_EPOCHS: '3' });
    p.setEpoch(1);
    const old = { data: 'old payload', links: [], epoch: 1, stackId: 'stack:t' };
    const kept = { data: 'pinned payload', links: [], epoch: 1, stackId: 'stack:t', pinned: true };
    await putNode(p.db.prisma, p.objects, { ...old, cid: computeDataCid(old) }, 1);
    await putNode(p.db.prisma, p.objects, { ...kept, cid: computeDataCid(kept) }, 1);
    p.setEpoch(10);
    const r = await memoryReconciler(p, 10);
    expect(r.pruned).toBe(1);
    expect(await p.db.prisma.memoryNode.findMany({ select: { cid: true } })).toEqual([{ cid: computeDataCid(kept) }]);
    expect(await p.objects.list('dag/')).toHaveLength(1);
  });
});
