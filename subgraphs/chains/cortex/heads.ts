// The stacks' heads mirrored on their identity NFTs once an epoch, many in one call. A head move
// writes no intent: it leaves the stack's head apart from the head its NFT holds (the stacks
// context's `mirroredHead`), which is the whole record of what is left to mirror. At the first
// round of each epoch the submitter reads the stacks whose head the chain lacks (a partial index:
// only those), leaves out the heads already on their way, and queues `updateStacks` rows of up to
// MAX_HEADS_PER_CALL heads each (StackIdentity.updateStacks, which skips a token that is no
// platform stack yet or whose epoch would go back). When a row is mined, the StackUpdated events of
// its receipt say which heads the chain applied; those stacks hold them now. A head that moved
// again meanwhile, or one the chain skipped, is still apart and goes with the next epoch's rows.
// So a burst of perceives on any number of stacks costs one transaction per MAX_HEADS_PER_CALL
// stacks an epoch, not one per stack per round, and no row of the outbox is written by a perceive.
import type { Log } from 'ethers';
import type { Db } from '../../../lib/db/index.ts';
import { stackHeadsPort, type StackHead } from '../record-port.ts';
import { iface } from './artifacts.ts';
import { headsOf } from './calls.ts';

/** Heads in one updateStacks call (gas: about 25k to 110k each; blocks hold 30M). */
export const MAX_HEADS_PER_CALL = 100;
/** Heads one round queues at most (the rest go next epoch), read a page at a time. */
export const MAX_HEADS_A_ROUND = 50_000;
const PAGE = 5_000;

/** Queues the heads the chain lacks (less those already on their way) as updateStacks rows; returns how many heads. */
export async function queueHeads(db: Db, epoch: number | undefined): Promise<number> {
  const lacking: StackHead[] = [];
  for (let after: string | undefined; lacking.length < MAX_HEADS_A_ROUND; ) {
    const page = await stackHeadsPort().unmirrored(db, PAGE, after);
    lacking.push(...page);
    if (page.length < PAGE) break;
    after = page[page.length - 1]!.stackId;
  }
  if (!lacking.length) return 0;
  const inFlight = new Set<string>();
  const rows = await db.chainOutbox.findMany({ where: { kind: 'updateStacks', status: { in: ['pending', 'submitted'] } }, select: { payload: true } });
  for (const r of rows) for (const h of headsOf(r.payload as Record<string, unknown>)) inFlight.add(`${h.stackId}\u0000${h.head}`);
  const todo = lacking.filter((h) => !inFlight.has(`${h.stackId}\u0000${h.head}`));
  const calls: StackHead[][] = [];
  for (let i = 0; i < todo.length; i += MAX_HEADS_PER_CALL) calls.push(todo.slice(i, i + MAX_HEADS_PER_CALL));
  if (!calls.length) return 0;
  const at = epoch ?? null;
  await db.chainOutbox.createMany({
    data: calls.map((heads, i) => ({ kind: 'updateStacks', ref: `heads:${at ?? 'now'}:${i}`, epoch: at, payload: { epoch: at, heads } as never })),
  });
  return todo.length;
}

const STACK_UPDATED = iface('StackIdentity').getEvent('StackUpdated')!.topicHash;

/** Token ids whose StackUpdated the receipt of an updateStacks call carries (the heads the chain applied). */
export function appliedHeads(logs: readonly Pick<Log, 'address' | 'topics'>[], stackIdentity: string): Set<number> {
  const out = new Set<number>();
  for (const l of logs)
    if (l.address.toLowerCase() === stackIdentity.toLowerCase() && l.topics[0] === STACK_UPDATED && l.topics[1]) out.add(Number(BigInt(l.topics[1])));
  return out;
}

/**
 * After an updateStacks row is confirmed: the stacks whose heads the chain applied hold them now,
 * each confirmed when no other intent of its record (the identity's mint) is still outstanding. A
 * head the chain skipped waits for the next epoch while its stack's mint is outstanding (the token
 * is on its way); with no mint on its way there is no token to hold it, and it is set as sent, so
 * it is not sent again every epoch (the stack's record is not confirmed).
 */
export async function headsMirrored(db: Db, payload: Record<string, unknown>, applied: Set<number>): Promise<void> {
  const heads = headsOf(payload);
  const outstanding = await db.chainOutbox.findMany({
    where: { kind: { in: ['mintIdentity', 'updateStack'] }, status: { in: ['pending', 'submitted'] }, ref: { in: heads.map((h) => h.stackId) } },
    select: { ref: true },
  });
  const busy = new Set(outstanding.map((r) => r.ref));
  await stackHeadsPort().mirrored(
    db,
    heads.flatMap((h) =>
      applied.has(h.tokenId)
        ? [{ stackId: h.stackId, head: h.head, confirm: !busy.has(h.stackId) }]
        : busy.has(h.stackId)
          ? []
          : [{ stackId: h.stackId, head: h.head, confirm: false }],
    ),
  );
}
