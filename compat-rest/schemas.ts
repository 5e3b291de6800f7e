// The /v1 routes' request schemas (TypeBox, so they are JSON Schema for the validator and static
// types for the handlers, through fastify's TypeBox type provider). Exported by name: whatever
// takes the same input as a route (the MCP tools) validates it with the same schema.
//
// Each schema is the one the route had as plain JSON Schema: same bounds, same required members,
// extra members allowed. A few members use Type.Unsafe to keep their exact JSON Schema (a type
// array, an enum) so validation and its error messages stay as they were.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { RESIDUE_LIST_LIMIT, RESIDUE_KINDS } from '../subgraphs/residues/index.ts';
import { StackIdBody, StackIdParams, StackIdSchema } from '../subgraphs/economy/index.ts';

/** A string enum as `{type: 'string', enum}` (Type.Union of literals would be an anyOf). */
export const StringEnum = <T extends string>(values: readonly T[], opts: Record<string, unknown> = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...opts });

/** `{type: ['string', 'null']}`. */
export const NullableString = (opts: Record<string, unknown> = {}) => Type.Unsafe<string | null>({ type: ['string', 'null'], ...opts });

/** Ids of stacks and sleeves in the stack, sleeve and memory routes. */
export const Id = Type.String({ minLength: 1, maxLength: 300 });
/** Ids in the residue, needlecast, treasury and faucet routes. */
export const Id256 = Type.String({ minLength: 1, maxLength: 256 });

export const IdParams = Type.Object({ id: Id });
export const SleeveStackIdParams = Type.Object({ stackId: Id });
export { StackIdBody, StackIdParams, StackIdSchema };

// Stacks
const Coeff = Type.Number();
export const Cpv = Type.Object({
  syncCoeff: Type.Optional(Coeff),
  memoryCoeff: Type.Optional(Coeff),
  computeCoeff: Type.Optional(Coeff),
  residueCoeff: Type.Optional(Coeff),
  routingCoeff: Type.Optional(Coeff),
});
/** Shape A `{name, kind?, cpv?}` or Shape B `{pubkey, cpv, name?, kind?}` (the domain tells them apart). */
export const CreateStackBody = Type.Object({
  name: Type.Optional(Type.String()),
  kind: Type.Optional(Type.String()),
  pubkey: Type.Optional(Type.String()),
  cpv: Type.Optional(Cpv),
});

// Sleeves
export const SpawnSleeveBodyA = Type.Object({
  stackId: Id,
  embodimentType: Type.String(),
  hostname: Type.Optional(NullableString()),
});
export const SpawnSleeveBodyB = Type.Object({
  kind: Type.String(),
  tickRate: Type.Optional(Type.Integer()),
  hostname: Type.Optional(NullableString()),
});

// Memory
export const PerceiveSleeveBody = Type.Object({ input: Type.String() });
export const PerceiveBody = Type.Object({ stackId: Id, sleeveId: Id, text: Type.String() });
export const PinBody = Type.Object({ cid: Type.String({ minLength: 1, maxLength: 300 }) });
export const RememberBody = Type.Object({ text: Type.String(), pin: Type.Optional(Type.Boolean()) });
export const RecallQuery = Type.Object({ depth: Type.Integer(), memoryToken: Type.Optional(Type.Number()) });
export const RecallBody = Type.Object({ stackId: Id, depth: Type.Integer(), sleeveId: Type.Optional(Id) });

// Residues
export const RESIDUE_STATUSES = ['detected', 'open', 'claimed', 'resolved', 'expired'] as const;
export const ResidueListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: RESIDUE_LIST_LIMIT })),
  status: Type.Optional(StringEnum(RESIDUE_STATUSES)),
  kind: Type.Optional(StringEnum(RESIDUE_KINDS)),
  stackId: Type.Optional(Id256),
});
export const ResidueIdParams = Type.Object({ id: Id256 });
export const ProofBody = Type.Object({
  claimant: Id256,
  proof: Type.Optional(Type.Unsafe<Record<string, unknown>>({ type: 'object' })),
});

// Needlecast
/** Shape A `{from, to, sagaId?}` or Shape B `{stackId, fromSleeveId, toSleeveKind, toTickRate?}`. */
export const NeedlecastBody = Type.Object({
  from: Type.Optional(Id256),
  to: Type.Optional(Id256),
  sagaId: Type.Optional(Id256),
  stackId: Type.Optional(Id256),
  fromSleeveId: Type.Optional(Id256),
  toSleeveKind: Type.Optional(Id256),
  toTickRate: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400_000 })),
});
export const SagaIdParams = Type.Object({ sagaId: Id256 });

// Treasury and faucet (the routes are the economy context's, shared with its own services)
export const ClaimBody = StackIdBody;
export const DripBody = StackIdBody;
export const IssuanceParams = StackIdParams;
export const BalancesParams = StackIdParams;

/** The static type a schema validates to. */
export type Input<T extends TSchema> = Static<T>;
