// The memory context as the sleeves use it (their port p.ports.sleeveMemory, filled by
// bin/assembly.ts): the Hippocampus (local or over HTTP, as assembly chose), the pin price, a DHF
// reassembly and the pinned-shard check.
import { checkPinnedShards, hippocampusClient, PIN_COST_MILLI, reconstruct } from '../subgraphs/memory/index.ts';
import type { SleeveMemory } from '../subgraphs/sleeves/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';

export const sleeveMemory: SleeveMemory = {
  pinCostMilli: PIN_COST_MILLI,
  meta: (p, cid, tx) => hippocampusClient(p).meta(cid, tx),
  pin: (p, cid, tx) => hippocampusClient(p).pin(cid, tx),
  async reassemble(p, stackId, head, depth) {
    const stack = await getStackRow(p.db.prisma, stackId);
    const loaded = await reconstruct(p, { ...stack, episodicHead: head }, depth);
    return loaded.fragments.map((f) => f.node.cid);
  },
  checkPinnedShards: async (p, stackId, sleeveId) => void (await checkPinnedShards(p, stackId, sleeveId)),
};
