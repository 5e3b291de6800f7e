// The stacks list an inspector pages through: newest first, optionally narrowed by a search over
// id, name, kind and (a number) token id, with the total that matches. Bounded so a database of
// 10,000 stacks answers one page, never the whole table.
import type { Db } from '../../lib/db/index.ts';
import { badRequest } from '../../lib/errors.ts';
import type { StackRow } from './stacks.ts';

export const STACK_PAGE_MAX = 100;
const SEARCH_MAX = 200;
const OFFSET_MAX = 1_000_000;

export interface StackPageInput {
  search?: string | null;
  first?: number | null;
  offset?: number | null;
}

export async function pageStacks(db: Db, input: StackPageInput): Promise<{ total: number; rows: StackRow[] }> {
  const first = input.first ?? 25;
  const offset = input.offset ?? 0;
  if (!Number.isInteger(first) || first < 0 || first > STACK_PAGE_MAX)
    throw badRequest(`first must be an integer from 0 to ${STACK_PAGE_MAX}`, [{ path: 'first', message: 'is out of range' }]);
  if (!Number.isInteger(offset) || offset < 0 || offset > OFFSET_MAX)
    throw badRequest(`offset must be an integer from 0 to ${OFFSET_MAX}`, [{ path: 'offset', message: 'is out of range' }]);
  const search = (input.search ?? '').trim();
  if (search.length > SEARCH_MAX) throw badRequest(`search must be at most ${SEARCH_MAX} characters`, [{ path: 'search', message: 'is too long' }]);
  const where = search
    ? {
        OR: [
          { id: { contains: search, mode: 'insensitive' as const } },
          { name: { contains: search, mode: 'insensitive' as const } },
          { kind: { equals: search.toLowerCase() } },
          ...(/^\d{1,9}$/.test(search) ? [{ tokenId: Number(search) }] : []),
        ],
      }
    : {};
  const [total, rows] = await Promise.all([
    db.stack.count({ where }),
    first === 0 ? Promise.resolve([] as StackRow[]) : db.stack.findMany({ where, orderBy: { tokenId: 'desc' }, skip: offset, take: first }),
  ]);
  return { total, rows };
}
