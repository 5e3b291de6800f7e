// What the gateway's /v1 routes (and /healthz) answer, per status: the response half of the route
// schemas, from which the OpenAPI document is generated (compat-rest/openapi.ts). The named
// schemas become components; routes name them by $ref.
//
// The shapes are the ones the handlers answer today, both spec shapes included (a stack carries
// pubKey and pubkey, sleeves, anchors, balances, chainStatus). Responses are serialised with
// JSON.stringify (lib/http.ts), not from these schemas, so a schema can never drop a field; the
// test that validates real responses against the document treats every object without an explicit
// additionalProperties as closed, so a field a route answers and the document leaves out fails it.
import { Type, type TSchema } from '@sinclair/typebox';
import { NullableString } from './schemas.ts';

const Int = Type.Integer;
const Num = Type.Number;
const Str = Type.String;
const Bool = Type.Boolean;
const NullableInt = () => Type.Unsafe<number | null>({ type: ['integer', 'null'] });

// ------------------------------------------------------------------ problems
export const FieldProblem = Type.Object({ path: Str(), message: Str() }, { $id: 'FieldProblem' });

/**
 * RFC 9457 problem details, the body of every error (application/problem+json). Members beyond
 * the five: `errors` (400, one per invalid field), `token`, `required`, `available` (402),
 * `retryAfter` (429, seconds; also the Retry-After header), `sagaId` and `sagaStatus` (a needlecast
 * step's problem). Open: a problem passed through from an internal service keeps its members.
 */
export const Problem = Type.Object(
  {
    type: Str({ description: 'A URI naming the problem kind: https://cog.dev/problems/<code in kebab case>' }),
    title: Str(),
    status: Int({ description: 'The HTTP status' }),
    detail: Str(),
    code: Str({ description: 'The machine-readable error code (BAD_REQUEST, NOT_FOUND, INSUFFICIENT_TOKENS, RATE_LIMITED, ...)' }),
    errors: Type.Optional(Type.Array(Type.Ref(FieldProblem), { description: '400: the invalid fields' })),
    token: Type.Optional(Str({ description: '402: the token that is short' })),
    required: Type.Optional(Num({ description: '402: how much of it the request needs' })),
    available: Type.Optional(Num({ description: '402: how much of it there is' })),
    retryAfter: Type.Optional(Num({ description: '429: seconds until a retry may succeed' })),
    sagaId: Type.Optional(Str()),
    sagaStatus: Type.Optional(Str()),
  },
  { $id: 'Problem', additionalProperties: true },
);

// ------------------------------------------------------------------ economy values
export const TokenAmounts = Type.Object({ compute: Num(), memory: Num(), sync: Num(), routing: Num(), residue: Num() }, { $id: 'TokenAmounts' });
export const CoreAmounts = Type.Object({ compute: Num(), memory: Num(), sync: Num(), routing: Num() }, { $id: 'CoreAmounts' });
export const Cpv = Type.Object({ syncCoeff: Num(), memoryCoeff: Num(), computeCoeff: Num(), residueCoeff: Num(), routingCoeff: Num() }, { $id: 'Cpv' });

// ------------------------------------------------------------------ stacks and sleeves
export const Sleeve = Type.Object(
  {
    id: Str(),
    stackId: Str(),
    embodimentType: Str({ description: 'Shape A name of the kind' }),
    kind: Str({ description: 'Shape B name of the kind' }),
    alive: Bool(),
    frozen: Bool(),
    drift: Num(),
    syncEpoch: Int(),
    lastSync: Str({ format: 'date-time' }),
    tokens: Type.Ref(TokenAmounts),
    hostname: NullableString(),
    createdAt: Str({ format: 'date-time' }),
    tickRate: Int(),
    identityUrl: NullableString(),
    chainStatus: Str(),
  },
  { $id: 'Sleeve' },
);

export const StackAnchor = Type.Object(
  {
    epoch: Int(),
    crossRoot: Str(),
    ipfsRoot: Str(),
    blockHash: NullableString({ description: 'The Medulla block that committed the tuple; null until one does' }),
    blockHeight: NullableInt(),
    chainStatus: Str(),
  },
  { $id: 'StackAnchor' },
);

export const Stack = Type.Object(
  {
    id: Str(),
    tokenId: Int(),
    name: Str(),
    kind: Str(),
    pubKey: Str({ description: 'Shape A name of the ed25519 public key (hex)' }),
    pubkey: Str({ description: 'Shape B name of the same key' }),
    epoch: Int(),
    cpv: Type.Ref(Cpv),
    binding: Type.Object({ floor: Num(), decayRate: Num() }),
    createdAt: Str({ format: 'date-time' }),
    episodicHead: NullableString(),
    lastActiveEpoch: Int(),
    chainStatus: Str(),
    sleeves: Type.Array(Type.Ref(Sleeve)),
    anchors: Type.Array(Type.Ref(StackAnchor)),
    balances: Type.Ref(TokenAmounts),
    identityPriv: Type.Optional(Str({ description: 'Shape A creation only: the private key seed (hex), returned once' })),
  },
  { $id: 'Stack' },
);

/** ERC-8004 registration-v1 (the document a stack's agentURI names); objects closed as the standard lists them. */
export const AgentRegistration = Type.Object(
  {
    type: Type.Literal('https://eips.ethereum.org/EIPS/eip-8004#registration-v1'),
    name: Str(),
    description: Str(),
    image: Str({ description: 'A data: URI (an SVG badge)' }),
    services: Type.Array(Type.Object({ name: Str(), endpoint: Str(), version: Type.Optional(Str()) }), {
      description: 'REST, GraphQL, MCP (when the gateway serves /mcp), DID (the stack key as did:key), sleeve:<kind> (identity endpoints)',
    }),
    x402Support: Bool(),
    active: Bool({ description: 'true while the stack has an alive sleeve' }),
    registrations: Type.Array(Type.Object({ agentId: Int(), agentRegistry: Str({ description: 'eip155:<chainId>:<StackIdentity address>' }) })),
    supportedTrust: Type.Array(Str()),
  },
  { $id: 'AgentRegistration' },
);

// ------------------------------------------------------------------ memory
export const Sealed = Type.Object({ iv: Str(), ct: Str(), v: Type.Literal(1) }, { $id: 'Sealed' });
export const MemoryNode = Type.Object(
  {
    cid: Str(),
    ciphertext: Type.Union([Type.Ref(Sealed), Type.Null()], { description: 'null when a client stored an opaque payload (then data)' }),
    data: Type.Optional(Str()),
    links: Type.Array(Str()),
    epoch: Int(),
    kind: Str(),
    pinned: Bool(),
    stackId: Str(),
  },
  { $id: 'MemoryNode' },
);

// ------------------------------------------------------------------ treasury, residues, needlecast, chains
export const Emission = Type.Object(
  {
    id: Str(),
    stackId: Str(),
    epoch: Int(),
    amounts: Type.Ref(CoreAmounts),
    cpv: Type.Ref(Cpv),
    ebcFactor: Num(),
    createdAt: Str({ format: 'date-time' }),
  },
  { $id: 'Emission' },
);

export const Residue = Type.Object(
  {
    id: Str(),
    kind: Str(),
    trigger: Str(),
    bounty: Num(),
    status: Str(),
    stackId: Type.Optional(Str()),
    sleeveId: Type.Optional(Str()),
    epoch: Int(),
    openedAt: Str({ format: 'date-time' }),
    expiresAtEpoch: Int(),
    claimant: Type.Optional(Str()),
  },
  { $id: 'Residue' },
);

export const SagaStep = Type.Object(
  {
    name: Str(),
    alias: NullableString(),
    status: Str({ description: 'pending | done | failed | compensated' }),
    at: NullableString(),
    data: Type.Object({}, { additionalProperties: true, description: 'What the step recorded (open)' }),
  },
  { $id: 'SagaStep' },
);

export const Saga = Type.Object(
  {
    ok: Bool(),
    sagaId: Str(),
    status: Str(),
    stackId: Str(),
    from: Str(),
    to: NullableString(),
    toKind: Str(),
    route: Type.Array(Str(), { description: 'Step names, in order' }),
    routeHash: NullableString(),
    shards: Type.Array(Str()),
    cost: Type.Object({ routing: Num(), memory: Num() }),
    deltaEpoch: Int(),
    steps: Type.Array(Type.Ref(SagaStep)),
    error: NullableString(),
    createdAt: Str({ format: 'date-time' }),
  },
  { $id: 'Saga' },
);

export const NeedlecastA = Type.Object(
  {
    ok: Bool(),
    sagaId: Str(),
    route: Str({ description: 'The route record hash ("" until anchored)' }),
    shards: Int({ description: 'How many shards' }),
    status: Str(),
  },
  { $id: 'NeedlecastA' },
);
export const NeedlecastB = Type.Object(
  {
    saga: Str(),
    status: Str(),
    from: Str(),
    to: NullableString(),
    cost: Type.Object({ routing: Num() }),
    shardsTransferred: Int(),
  },
  { $id: 'NeedlecastB' },
);

export const Block = Type.Object(
  {
    blockHash: Str(),
    height: Int(),
    epoch: Int(),
    difficulty: Num(),
    ts: Int({ description: 'Unix seconds' }),
    crossRoot: Str(),
    evmRoot: Str(),
    ipfsRoot: Str(),
    sleevesRoot: Str(),
    synapticFieldRoot: Str(),
    prevHash: Str(),
    nonce: Int(),
    tsMs: Int(),
    coherenceEpoch: NullableInt(),
  },
  { $id: 'Block' },
);

/** Every named schema (the document's components). */
export const COMPONENTS: TSchema[] = [
  FieldProblem,
  Problem,
  TokenAmounts,
  CoreAmounts,
  Cpv,
  Sleeve,
  StackAnchor,
  Stack,
  AgentRegistration,
  Sealed,
  MemoryNode,
  Emission,
  Residue,
  SagaStep,
  Saga,
  NeedlecastA,
  NeedlecastB,
  Block,
];

// ------------------------------------------------------------------ per route
const ref = Type.Ref;
const problemContent = { content: { 'application/problem+json': { schema: ref(Problem) } } };
const PROBLEM_TEXT: Record<number, string> = {
  400: 'Invalid input (problem+json; `errors` names the fields)',
  401: 'COG_AUTH=required and the request is not signed by the stack it acts for',
  402: 'Not enough tokens (`token`, `required`, `available`)',
  403: 'The sleeve does not belong to the stack',
  404: 'No such stack, sleeve, residue or saga',
  409: 'The state does not allow it (decommissioned, frozen, not open, exists)',
  410: 'Gated: outside the epoch window and not pinned',
  413: 'Body over 1 MiB',
  414: 'A path parameter over 500 characters',
  422: 'The proof does not hold',
  429: 'Rate limited (Retry-After)',
  500: 'Unexpected failure (logged; leaks nothing)',
  503: 'A dependency is down; retryable (Retry-After)',
};

export interface RouteDoc {
  /** The operation's name in the document (generated clients name their functions by it). */
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  /** Success statuses and their bodies. */
  ok: Record<number, TSchema>;
  /** Error statuses this route can answer besides the common ones. */
  errors?: number[];
  /** Needs a signature under COG_AUTH=required (default: every write but stack creation). */
  signed?: boolean;
}

const json = (schema: TSchema, description: string) => ({ description, content: { 'application/json': { schema } } });

/**
 * Which statuses a route answers: its own, plus what every /v1 route can answer (429 rate limit,
 * 500, 503 a dependency down), 400 and 413 where input or a body is read, 414 where the path has
 * a parameter, 401 where a signature is
 * required (COG_AUTH=required: every write but stack creation, and the recall GET).
 */
export function responsesOf(method: string, url: string, doc: RouteDoc, hasInput: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, schema] of Object.entries(doc.ok)) out[status] = json(schema, 'OK');
  const errors = new Set(doc.errors ?? []);
  if (url.startsWith('/v1/')) {
    for (const s of [429, 500, 503]) errors.add(s);
    if (method !== 'GET') errors.add(413);
    // A body that is not JSON is a 400 even where the route reads none.
    if (hasInput || method !== 'GET') errors.add(400);
    // A path parameter over the router's 500 characters is refused before the route runs.
    if (url.includes(':')) errors.add(414);
    if (doc.signed ?? (method !== 'GET' && !(method === 'POST' && url === '/v1/stacks'))) errors.add(401);
  } else {
    errors.add(500);
  }
  for (const s of [...errors].sort()) out[s] = { description: PROBLEM_TEXT[s] ?? 'Problem', ...problemContent };
  return out;
}

const Ok = Type.Object({ ok: Bool() });
const Cid = Type.Object({ cid: Str() });

/** The documented routes, by "METHOD url" (a route of the gateway missing here fails its test). */
export const ROUTE_DOCS: Record<string, RouteDoc> = {
  'GET /healthz': {
    operationId: 'health',
    tags: ['gateway'],
    summary: 'Liveness of the gateway',
    ok: { 200: Type.Object({ ok: Bool(), name: Str(), ts: Int() }) },
  },
  'GET /v1/openapi.json': {
    operationId: 'openapi',
    tags: ['gateway'],
    summary: 'This document (OpenAPI 3.1); the reference page is at /v1/docs',
    ok: {
      200: Type.Object(
        { openapi: Str(), info: Type.Object({}, { additionalProperties: true }), paths: Type.Object({}, { additionalProperties: true }) },
        { additionalProperties: true },
      ),
    },
  },

  'POST /v1/stacks': {
    operationId: 'createStack',
    tags: ['stacks'],
    summary: 'Create a stack (Shape A {name, kind?, cpv?}: key generated, identityPriv returned once; Shape B {pubkey, cpv})',
    ok: { 201: ref(Stack) },
    errors: [409],
  },
  'GET /v1/stacks': { operationId: 'listStacks', tags: ['stacks'], summary: 'Every stack, oldest first', ok: { 200: Type.Array(ref(Stack)) } },
  'GET /v1/stacks/:id': {
    operationId: 'getStack',
    tags: ['stacks'],
    summary: 'One stack with its sleeves, anchors and balances',
    ok: { 200: ref(Stack) },
    errors: [404],
  },
  'GET /v1/stacks/:id/registration.json': {
    operationId: 'getStackRegistration',
    tags: ['stacks'],
    summary: "The stack's ERC-8004 agent registration file (its identity NFT's tokenURI)",
    ok: { 200: ref(AgentRegistration) },
    errors: [404],
  },

  'POST /v1/sleeves': {
    operationId: 'spawnSleeve',
    tags: ['sleeves'],
    summary: 'Spawn a sleeve (Shape A {stackId, embodimentType, hostname?})',
    ok: { 201: ref(Sleeve) },
    errors: [404, 409],
  },
  'POST /v1/sleeves/:stackId': {
    operationId: 'spawnSleeveB',
    tags: ['sleeves'],
    summary: 'Spawn a sleeve (Shape B {kind, tickRate?, hostname?})',
    ok: { 201: ref(Sleeve) },
    errors: [404, 409],
  },
  'GET /v1/sleeves': { operationId: 'listSleeves', tags: ['sleeves'], summary: 'Every alive sleeve', ok: { 200: Type.Array(ref(Sleeve)) } },
  'GET /v1/sleeves/:id': { operationId: 'getSleeve', tags: ['sleeves'], summary: 'One sleeve (alive or not)', ok: { 200: ref(Sleeve) }, errors: [404] },
  'DELETE /v1/sleeves/:id': {
    operationId: 'decommissionSleeve',
    tags: ['sleeves'],
    summary: 'Decommission a sleeve (tokens to the stack pool)',
    ok: { 200: Ok },
    errors: [404, 409],
  },
  'POST /v1/sleeves/:id/sync': {
    operationId: 'syncSleeve',
    tags: ['sleeves'],
    summary: 'Reset drift for 1 sync token',
    ok: { 200: Type.Object({ ok: Bool(), epoch: Int() }) },
    errors: [402, 404, 409],
  },
  'GET /v1/tokens/balances/:stackId': {
    operationId: 'sleeveTokenTotals',
    tags: ['economy'],
    summary: 'Token totals of the alive sleeves of a stack (Shape A)',
    ok: { 200: Type.Object({ stackId: Str(), sleeveTotals: ref(TokenAmounts) }) },
    errors: [404],
  },
  'GET /v1/coordination/desync': {
    operationId: 'listDesyncedSleeves',
    tags: ['sleeves'],
    summary: 'Alive sleeves whose drift is above the maximum',
    ok: { 200: Type.Array(Type.Object({ id: Str(), stackId: Str(), drift: Num() })) },
  },

  'POST /v1/sleeves/:id/perceive': {
    operationId: 'perceiveSleeve',
    tags: ['memory'],
    summary: 'Perceive (Shape A {input}): 0.5 compute, drift +1',
    ok: { 200: Type.Object({ cid: Str(), thought: Str() }) },
    errors: [402, 404, 409],
  },
  'POST /v1/perceive': {
    operationId: 'perceive',
    tags: ['memory'],
    summary: 'Perceive (Shape B {stackId, sleeveId, text})',
    ok: { 200: Type.Object({ cid: Str(), epoch: Int(), cost: Type.Object({ compute: Num() }) }) },
    errors: [402, 403, 404, 409],
  },
  'POST /v1/stacks/:id/remember': {
    operationId: 'rememberStack',
    tags: ['memory'],
    summary: 'Remember with the richest sleeve of the stack (pin costs 1 memory)',
    ok: { 200: Cid },
    errors: [402, 404, 409],
  },
  'POST /v1/sleeves/:id/remember': {
    operationId: 'rememberSleeve',
    tags: ['memory'],
    summary: 'Remember with this sleeve (pin costs 1 memory)',
    ok: { 200: Cid },
    errors: [402, 404, 409],
  },
  'POST /v1/sleeves/:id/pin': {
    operationId: 'pinSleeve',
    tags: ['memory'],
    summary: "Pin a node of the sleeve's stack ({cid}): 1 memory from this sleeve, 0 when already pinned",
    ok: { 200: Type.Object({ cid: Str(), pinned: Type.Literal(true), cost: Type.Object({ memory: Num() }) }) },
    errors: [402, 403, 404, 409],
  },
  'GET /v1/stacks/:id/recall': {
    operationId: 'recallStack',
    tags: ['memory'],
    summary: 'Recall (Shape A): fragments are Memory nodes, broken the unreadable CIDs; spends memory tokens',
    ok: { 200: Type.Object({ fragments: Type.Array(ref(MemoryNode)), broken: Type.Array(Str()), fidelity: Num() }) },
    errors: [402, 403, 404, 409],
    signed: true,
  },
  'POST /v1/recall': {
    operationId: 'recall',
    tags: ['memory'],
    summary: 'Recall (Shape B {stackId, depth, sleeveId?}): decrypted fragments, broken a count',
    ok: {
      200: Type.Object({
        fragments: Type.Array(Type.Object({ cid: Str(), text: Str(), epoch: Int() })),
        broken: Int(),
        fidelity: Num(),
        cost: Type.Object({ memory: Num() }),
      }),
    },
    errors: [402, 403, 404, 409],
  },

  'GET /v1/stacks/:stackId/balances': {
    operationId: 'stackBalances',
    tags: ['economy'],
    summary: 'Balances (Shape B): raw (alive sleeves + pool) and effective (x coefficient x EBC decay)',
    ok: {
      200: Type.Object({
        raw: ref(TokenAmounts),
        effective: ref(TokenAmounts),
        cpv: ref(Cpv),
        lastActiveEpoch: Int(),
        currentEpoch: Int(),
        ebcFactor: Num(),
      }),
    },
    errors: [404],
  },
  'GET /v1/treasury/issuance/:stackId': {
    operationId: 'issuance',
    tags: ['economy'],
    summary: 'The last 100 emissions of a stack, newest first',
    ok: { 200: Type.Array(ref(Emission)) },
    errors: [404],
  },
  'POST /v1/treasury/claim': {
    operationId: 'claim',
    tags: ['economy'],
    summary: 'Move everything claimable into the stack pool',
    ok: { 200: Type.Object({ stackId: Str(), claimable: ref(CoreAmounts) }) },
    errors: [404],
  },
  'POST /v1/faucet/drip': {
    operationId: 'faucetDrip',
    tags: ['economy'],
    summary: 'Development tokens: 100 of four tokens, one drip per cooldown per stack (429 until then)',
    ok: { 200: Type.Object({ ok: Bool(), granted: ref(CoreAmounts), sleeves: Type.Array(Str()) }) },
    errors: [404],
    signed: true,
  },

  'GET /v1/coordination/residues': {
    operationId: 'listResidues',
    tags: ['residues'],
    summary: 'Residues, newest first, filtered by status, kind, stackId',
    ok: { 200: Type.Array(ref(Residue)) },
  },
  'GET /v1/coordination/residues/:id': { operationId: 'getResidue', tags: ['residues'], summary: 'One residue', ok: { 200: ref(Residue) }, errors: [404] },
  'POST /v1/coordination/residues/:id/proof': {
    operationId: 'submitProof',
    tags: ['residues'],
    summary: 'Claim an open residue with a proof; the bounty goes to the claimant',
    ok: { 200: ref(Residue) },
    errors: [404, 409, 422],
  },

  'POST /v1/needlecast': {
    operationId: 'needlecast',
    tags: ['needlecast'],
    summary: 'Re-sleeve: Shape A {from, to, sagaId?} or Shape B {stackId, fromSleeveId, toSleeveKind, toTickRate?}',
    description: 'Answers in the shape asked: Shape A {ok, sagaId, route, shards, status}, Shape B {saga, status, from, to, cost, shardsTransferred}.',
    ok: { 200: Type.Union([ref(NeedlecastA), ref(NeedlecastB)]) },
    errors: [402, 403, 404, 409, 422],
  },
  'GET /v1/needlecast/:sagaId': { operationId: 'getSaga', tags: ['needlecast'], summary: 'A saga with its steps', ok: { 200: ref(Saga) }, errors: [404] },

  'GET /v1/epochs/current': {
    operationId: 'currentEpoch',
    tags: ['chains'],
    summary: 'The current epoch, Medulla height and tip',
    ok: { 200: Type.Object({ epoch: Int(), height: Int(), tip: Str() }) },
  },
  'POST /v1/mining/block': { operationId: 'mineBlock', tags: ['chains'], summary: 'Mine one Medulla block now', ok: { 200: ref(Block) } },
};
