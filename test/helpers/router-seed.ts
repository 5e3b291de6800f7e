// The router benchmark's data (bench/router.ts), also what the router's tests run their queries on.
import type { TestPlatform } from './platform.ts';
import { stackRow } from './stack-rows.ts';

/** 20 stacks with 3 sleeves, 3 memory nodes and a balance per sleeve. */
export async function seed(p: TestPlatform): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const { id } = await p.db.prisma.stack.create({ data: stackRow(i) });
    for (let j = 0; j < 3; j++) {
      const sleeve = `sleeve:ai:${i * 3 + j + 1}:${(i * 3 + j).toString(16).padStart(8, '0')}`;
      await p.db.prisma.sleeve.create({ data: { id: sleeve, stackId: id, embodimentType: 'ai', shape: 'A', tickRate: 2000 } });
      await p.db.prisma.balance.create({ data: { account: `sleeve:${sleeve}`, token: 'compute', milli: 1000n } });
    }
    for (let k = 0; k < 3; k++) {
      await p.db.prisma.memoryNode.create({
        data: { cid: `cog://${(i * 3 + k).toString(16).padStart(64, '0')}@0`, stackId: id, epoch: 0, links: [], size: 10 },
      });
    }
  }
}
