// The read of a stack, composed above the contexts: its own fields (stacks, with the economy's
// lastActiveEpoch), its sleeves with their balances (sleeves, economy), its anchors (the memory
// context's write epochs, the chains context's EpochAnchors). The REST shim and the stacks
// subgraph both read stacks through here.
import type { Db, Tx } from '../lib/db/index.ts';
import { readStatement } from '../lib/db/statement.ts';
import { notFound } from '../lib/errors.ts';
import type { Platform } from '../lib/platform.ts';
import { anchorsOfEpochs, anchorsRead, ANCHOR_EPOCHS_WANTED, type StackAnchor } from '../subgraphs/chains/index.ts';
import {
  addAmounts,
  balancesMilliRead,
  balancesOf,
  fromMilli,
  lastActiveEpochsRead,
  NEVER_ACTIVE,
  sleeveAccount,
  zeroAmounts,
  TOKENS,
  type Token,
  type TokenAmounts,
} from '../subgraphs/economy/index.ts';
import { writeEpochsOf, writeEpochsSql } from '../subgraphs/memory/index.ts';
import { aliveSleeveAccountsSql, sleeveRowsOfStacksRead, sleevesOfStacks, sleeveView, type SleeveRow, type SleeveView } from '../subgraphs/sleeves/index.ts';
import { listStackRows, stackCore, stackCores, stackRowsRead, type StackCore, type StackRow } from '../subgraphs/stacks/index.ts';

/** Milli-unit balances as the units a view shows. */
const milliToAmounts = (m: Record<Token, bigint>): TokenAmounts => {
  const out = zeroAmounts();
  for (const t of TOKENS) out[t] = fromMilli(m[t]);
  return out;
};

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
    // Onto the fresh core: a spread copy that gains members is V8's slow path (docs/decisions.md).
    return Object.assign(cores[i]!, {
      sleeves: own.map((s) => sleeveView(s, s.alive ? balances.get(sleeveAccount(s.id))! : zeroAmounts())),
      anchors: anchors.get(r.id) ?? [],
      balances: total,
    });
  });
}

/** The read of one stack. */
export async function stackView(p: Platform, row: StackRow, db: Db | Tx = p.db.prisma): Promise<StackView> {
  return (await views(db, [row]))[0];
}

/**
 * The read of one stack by id (404 when unknown), in one statement through the driver: each context's
 * read part (the stack row, its lastActiveEpoch, its sleeves, their balances, its anchors over its
 * write epochs) as one value of a read statement. Seven queries through Prisma before: a stack read
 * was most of the database's work under a mixed load on embedded PGlite.
 */
export async function readStackView(p: Platform, id: string): Promise<StackView> {
  if (typeof id !== 'string' || !id) throw notFound('Stack', String(id));
  const r = await readStatement(p.db, {
    stacks: stackRowsRead([id]),
    active: lastActiveEpochsRead([id]),
    sleeves: sleeveRowsOfStacksRead([id]),
    held: balancesMilliRead(aliveSleeveAccountsSql([id])),
    anchors: anchorsRead(writeEpochsSql([id], ANCHOR_EPOCHS_WANTED)),
  });
  const row = r.stacks.get(id);
  if (!row) throw notFound('Stack', id);
  const own = r.sleeves.get(id) ?? [];
  const total = zeroAmounts();
  const tokens = (s: SleeveRow) => {
    const m = r.held.get(sleeveAccount(s.id));
    return m ? milliToAmounts(m) : zeroAmounts();
  };
  for (const s of own) if (s.alive) addAmounts(total, tokens(s));
  return Object.assign(stackCore(row, r.active.get(id) ?? NEVER_ACTIVE), {
    sleeves: own.map((s) => sleeveView(s, s.alive ? tokens(s) : zeroAmounts())),
    anchors: r.anchors.get(id) ?? [],
    balances: total,
  });
}

/** Every stack, oldest first, each with its sleeves and anchors; six queries whatever the count. */
export async function listStacks(p: Platform): Promise<StackView[]> {
  return views(p.db.prisma, await listStackRows(p.db.prisma));
}
