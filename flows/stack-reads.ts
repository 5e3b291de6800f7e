// The read of a stack, composed above the contexts: its own fields (stacks, with the economy's
// lastActiveEpoch), its sleeves with their balances (sleeves, economy), its anchors (the memory
// context's write epochs, the chains context's EpochAnchors). The REST shim and the stacks
// subgraph both read stacks through here.
import type { Db, Tx } from '../lib/db/index.ts';
import type { Platform } from '../lib/platform.ts';
import { anchorsOfEpochs, ANCHOR_EPOCHS_WANTED, type StackAnchor } from '../subgraphs/chains/index.ts';
import { addAmounts, balancesOf, sleeveAccount, zeroAmounts, type TokenAmounts } from '../subgraphs/economy/index.ts';
import { writeEpochsOf } from '../subgraphs/memory/index.ts';
import { sleevesOfStacks, sleeveView, type SleeveRow, type SleeveView } from '../subgraphs/sleeves/index.ts';
import { listStackRows, stackCores, type StackCore, type StackRow } from '../subgraphs/stacks/index.ts';

/** The union read of one stack (both shapes): its sleeves (alive or not), anchors, balances over alive sleeves. */
export interface StackView extends StackCore {
  sleeves: SleeveView[];
  anchors: StackAnchor[];
  balances: TokenAmounts;
  identityPriv?: string;
}

/** The epoch anchors of several stacks (newest first, at most STACK_ANCHORS each): two queries. */
export async function anchorsOfStacks(db: Db | Tx, stackIds: readonly string[]): Promise<Map<string, StackAnchor[]>> {
  return anchorsOfEpochs(db, await writeEpochsOf(db, stackIds, ANCHOR_EPOCHS_WANTED));
}

async function views(db: Db | Tx, rows: StackRow[]): Promise<StackView[]> {
  const ids = rows.map((r) => r.id);
  const sleeves = await sleevesOfStacks(db, ids);
  const all = [...sleeves.values()].flat();
  const alive = all.filter((s) => s.alive);
  const balances = await balancesOf(
    db,
    alive.map((s) => sleeveAccount(s.id)),
  );
  const anchors = await anchorsOfStacks(db, ids);
  const cores = await stackCores(db, rows);
  return rows.map((r, i) => {
    const own: SleeveRow[] = sleeves.get(r.id) ?? [];
    const total = zeroAmounts();
    for (const s of own) if (s.alive) addAmounts(total, balances.get(sleeveAccount(s.id))!);
    return {
      ...cores[i]!,
      sleeves: own.map((s) => sleeveView(s, s.alive ? balances.get(sleeveAccount(s.id))! : zeroAmounts())),
      anchors: anchors.get(r.id) ?? [],
      balances: total,
    };
  });
}

/** The read of one stack. */
export async function stackView(p: Platform, row: StackRow, db: Db | Tx = p.db.prisma): Promise<StackView> {
  return (await views(db, [row]))[0];
}

/** Every stack, oldest first, each with its sleeves and anchors; six queries whatever the count. */
export async function listStacks(p: Platform): Promise<StackView[]> {
  return views(p.db.prisma, await listStackRows(p.db.prisma));
}
