// The economy's view of the stacks and sleeves that hold tokens (its port p.ports.stackHolders,
// filled by bin/assembly.ts): a stack's terms from the stacks context, the alive sleeves and their
// totals from the sleeves context. The economy sits below both and imports neither.
import type { StackHolders } from '../subgraphs/economy/index.ts';
import { aliveSleeveTotals, aliveSleeveTotalsRead, listAliveSleeves } from '../subgraphs/sleeves/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';

export const stackHolders: StackHolders = {
  stackTerms: (db, stackId) => getStackRow(db, stackId),
  aliveSleeveIds: async (db, stackId) => (await listAliveSleeves(db, stackId)).map((s) => s.id),
  aliveSleeveTotals: (db, stackIds) => aliveSleeveTotals(db, stackIds),
  aliveSleeveTotalsRead: (stackIds) => aliveSleeveTotalsRead(stackIds),
};
