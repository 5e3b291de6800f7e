// Residues subgraph resolvers: reads, Stack.residues / Sleeve.residues (batched), and proofs,
// through the residues domain (residues.ts, open.ts) the /v1 routes call.
import type { GqlContext } from '../../lib/graphql.ts';
import { byKey, guarded, health, loader } from '../../lib/graphql.ts';
import { badRequest } from '../../lib/errors.ts';
import { residueView, RESIDUE_KINDS, type ResidueRecord } from './open.ts';
import { countResidues } from './count.ts';
import { listResidues, submitProof, RESIDUE_LIST_LIMIT } from './residues.ts';

type ResidueRow = NonNullable<Awaited<ReturnType<GqlContext['platform']['db']['prisma']['residue']['findUnique']>>>;

/** The residue statuses (the REST list's `status` filter accepts these only). */
const RESIDUE_STATUSES = ['detected', 'open', 'claimed', 'resolved', 'expired'];

const residueLoader = (ctx: GqlContext) =>
  loader<string, ResidueRow | null>(ctx, 'residue', async (ids) =>
    byKey(ids, await ctx.platform.db.prisma.residue.findMany({ where: { id: { in: [...ids] } } }), (r) => r.id),
  );

/** The same checks as the REST list's query schema, as BAD_REQUEST Problems. */
function checkFilter(f: { status?: string | null; kind?: string | null; first?: number | null }) {
  if (f.status != null && !RESIDUE_STATUSES.includes(f.status))
    throw badRequest(`status must be one of ${RESIDUE_STATUSES.join(', ')}`, [{ path: 'status', message: 'is not a known status' }]);
  if (f.kind != null && !(RESIDUE_KINDS as string[]).includes(f.kind))
    throw badRequest(`kind must be one of ${RESIDUE_KINDS.join(', ')}`, [{ path: 'kind', message: 'is not a known kind' }]);
  const first = f.first ?? RESIDUE_LIST_LIMIT;
  if (!Number.isInteger(first) || first < 1 || first > RESIDUE_LIST_LIMIT)
    throw badRequest(`first must be an integer from 1 to ${RESIDUE_LIST_LIMIT}`, [{ path: 'first', message: 'is out of range' }]);
  return first;
}

/** Residues of many owners (stackId or sleeveId) in one query, newest first, `first` each. */
const residuesOf = (ctx: GqlContext, owner: 'stackId' | 'sleeveId', first: number, status: string | null) =>
  loader<string, ResidueRecord[]>(ctx, `residuesOf:${owner}:${first}:${status ?? ''}`, async (ids) => {
    const rows = await ctx.platform.db.prisma.residue.findMany({
      where: { [owner]: { in: [...ids] }, ...(status ? { status } : {}) },
      orderBy: [{ openedAt: 'desc' }, { id: 'desc' }],
    });
    return ids.map((id) =>
      rows
        .filter((r) => r[owner] === id)
        .slice(0, first)
        .map(residueView),
    );
  });

const ownerResidues = (owner: 'stackId' | 'sleeveId') =>
  guarded(async (o: { id: string }, a: { first?: number; status?: string | null }, ctx: GqlContext) => {
    const first = checkFilter(a);
    return residuesOf(ctx, owner, first, a.status ?? null).load(o.id);
  });

const ref = (__typename: string, id: string | undefined) => (id ? { __typename, id } : null);

export const resolvers = {
  Mutation: {
    submitResidueProof: guarded((_: unknown, a: { id: string; claimant: string; proof?: unknown }, ctx: GqlContext) => {
      const proof = a.proof ?? {};
      if (typeof proof !== 'object' || Array.isArray(proof)) throw badRequest('proof must be an object', [{ path: 'proof', message: 'must be an object' }]);
      return submitProof(ctx.platform, a.id, { claimant: a.claimant, proof: proof as Record<string, unknown> });
    }),
  },
  Query: {
    residue: guarded(async (_: unknown, a: { id: string }, ctx: GqlContext) => {
      const r = await residueLoader(ctx).load(a.id);
      return r && residueView(r);
    }),
    residues: guarded((_: unknown, a: { first?: number; status?: string; kind?: string; stackId?: string }, ctx: GqlContext) => {
      const first = checkFilter(a);
      return listResidues(ctx.platform, first, { status: a.status ?? undefined, kind: a.kind ?? undefined, stackId: a.stackId ?? undefined });
    }),
    residueCount: guarded((_: unknown, a: { status?: string | null; kind?: string | null }, ctx: GqlContext) => {
      checkFilter({ status: a.status, kind: a.kind });
      return countResidues(ctx.platform, { status: a.status ?? undefined, kind: a.kind ?? undefined });
    }),
    residuesHealth: health('residues'),
  },
  Residue: {
    __resolveReference: guarded(async (r: { id: string }, ctx: GqlContext) => {
      const row = await residueLoader(ctx).load(r.id);
      return row && residueView(row);
    }),
    stack: (r: ResidueRecord) => ref('Stack', r.stackId),
    sleeve: (r: ResidueRecord) => ref('Sleeve', r.sleeveId),
    claimantStack: (r: ResidueRecord) => ref('Stack', r.claimant),
    proof: guarded(async (r: ResidueRecord, _: unknown, ctx: GqlContext) => (await residueLoader(ctx).load(r.id))?.proof ?? null),
  },
  Stack: {
    __resolveReference: (r: { id: string }) => r,
    residues: ownerResidues('stackId'),
  },
  Sleeve: {
    __resolveReference: (r: { id: string }) => r,
    residues: ownerResidues('sleeveId'),
  },
};
