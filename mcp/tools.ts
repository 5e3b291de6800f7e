// The MCP tools: each is one /v1 route. A tool's arguments are the route's path parameters (under
// clearer names: `sleeveId` for `:id`) plus its body or query properties, with the route's own
// schemas (compat-rest/schemas.ts; test/mcp.test.ts checks each is the one its route registers);
// a call is validated with them before anything is sent, then becomes exactly one gateway
// request. No rule lives here: the gateway answers (or refuses) as it does for any REST client.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import type { TSchema } from '@sinclair/typebox';
import { badRequest } from '../lib/errors.ts';
import {
  BalancesParams,
  ClaimBody,
  CreateStackBody,
  DripBody,
  IdParams,
  NeedlecastBody,
  PerceiveSleeveBody,
  ProofBody,
  RecallBody,
  RememberBody,
  ResidueIdParams,
  ResidueListQuery,
  SpawnSleeveBodyA,
} from '../compat-rest/schemas.ts';

export type JsonSchema = Record<string, unknown>;
/** A route's request schemas, as the route declares them. */
export interface RouteSchema {
  params?: TSchema | JsonSchema;
  querystring?: TSchema | JsonSchema;
  body?: TSchema | JsonSchema;
}

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;
// The options of the routes' body validator (lib/http.ts): no coercion, defaults applied, all errors.
const ajv = addFormats(new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, allErrors: true, strict: false }));

export interface ToolDef {
  name: string;
  title: string;
  description: string;
  method: 'GET' | 'POST' | 'DELETE';
  /** The route as registered, e.g. `/v1/sleeves/:id/perceive`. */
  url: string;
  /** The route's schemas (the same objects the route registers). */
  schema: RouteSchema;
  /** Path parameter -> argument name. */
  params?: Record<string, string>;
  /** Where the other arguments go. */
  rest?: 'body' | 'query';
  readOnly?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
}

export const TOOLS: ToolDef[] = [
  {
    name: 'create_stack',
    title: 'Create a stack',
    method: 'POST',
    url: '/v1/stacks',
    schema: { body: CreateStackBody },
    rest: 'body',
    description:
      "Create a Stack: a persistent agent identity (an NFT on Cortex with an ed25519 keypair and a CPV). Shape A: {name, kind?}; Shape B: {pubkey, cpv}. The answer carries identityPriv once and never again: keep it, it signs the stack's writes when the platform runs COG_AUTH=required.",
  },
  {
    name: 'get_stack',
    title: 'Read a stack',
    method: 'GET',
    url: '/v1/stacks/:id',
    schema: { params: IdParams },
    params: { id: 'stackId' },
    readOnly: true,
    description: 'Read a Stack with its sleeves and anchors: epoch, CPV, episodicHead (the newest memory node).',
  },
  {
    name: 'spawn_sleeve',
    title: 'Spawn a sleeve',
    method: 'POST',
    url: '/v1/sleeves',
    schema: { body: SpawnSleeveBodyA },
    rest: 'body',
    description: 'Spawn a Sleeve (a body) for a stack: embodimentType human, ai, mining or memory. It starts alive with drift 0 and its initial tokens.',
  },
  {
    name: 'list_sleeves',
    title: 'List alive sleeves',
    method: 'GET',
    url: '/v1/sleeves',
    schema: {},
    readOnly: true,
    description: "List every alive Sleeve (all stacks). A single stack's sleeves, alive or not, are in get_stack.",
  },
  {
    name: 'decommission_sleeve',
    title: 'Decommission a sleeve',
    method: 'DELETE',
    url: '/v1/sleeves/:id',
    schema: { params: IdParams },
    params: { id: 'sleeveId' },
    destructive: true,
    idempotent: true,
    description: 'Decommission a Sleeve: it stops, its tokens return to the stack pool, pinned memory stays readable.',
  },
  {
    name: 'perceive',
    title: 'Perceive',
    method: 'POST',
    url: '/v1/sleeves/:id/perceive',
    schema: { params: IdParams, body: PerceiveSleeveBody },
    params: { id: 'sleeveId' },
    rest: 'body',
    description: 'Write a perception through a sleeve: encrypted under the current epoch key, linked to the episodic head. Costs 0.5 compute, adds 1 drift.',
  },
  {
    name: 'remember',
    title: 'Remember',
    method: 'POST',
    url: '/v1/stacks/:id/remember',
    schema: { params: IdParams, body: RememberBody },
    params: { id: 'stackId' },
    rest: 'body',
    description: 'Store a memory for a stack; with pin: true it is pinned (survives epoch gating and pruning, costs 1 memory) and becomes the episodic head.',
  },
  {
    name: 'recall',
    title: 'Recall',
    method: 'POST',
    url: '/v1/recall',
    schema: { body: RecallBody },
    rest: 'body',
    description:
      "Recall a stack's memory from its episodic head, breadth-first to `depth` levels (at most its memory balance): decrypted fragments newest first, the broken count, fidelity and cost. Adds 0.1 drift.",
  },
  {
    name: 'sync',
    title: 'Sync a sleeve',
    method: 'POST',
    url: '/v1/sleeves/:id/sync',
    schema: { params: IdParams },
    params: { id: 'sleeveId' },
    description: 'Sync a sleeve: drift back to 0 for 1 sync token.',
  },
  {
    name: 'needlecast',
    title: 'Needlecast',
    method: 'POST',
    url: '/v1/needlecast',
    schema: { body: NeedlecastBody },
    rest: 'body',
    description:
      "Move a stack's running state from one sleeve to another (six-step saga: freeze, shard, pin, anchor, reconstruct, settle; compensated on failure). Shape A: {from: sleeve id, to: sleeve id or kind}; Shape B: {stackId, fromSleeveId, toSleeveKind, toTickRate?}. sagaId (needle:<16-64 hex>) is optional: one is chosen when missing, and a known one returns that saga. Sends a progress notification per step when the call carries a progressToken.",
  },
  {
    name: 'balances',
    title: 'Token balances',
    method: 'GET',
    url: '/v1/stacks/:stackId/balances',
    schema: { params: BalancesParams },
    params: { stackId: 'stackId' },
    readOnly: true,
    description: "A stack's balances: raw and effective (CPV and EBC decay applied), the CPV, last active and current epoch, the decay factor.",
  },
  {
    name: 'faucet_drip',
    title: 'Faucet drip',
    method: 'POST',
    url: '/v1/faucet/drip',
    schema: { body: DripBody },
    rest: 'body',
    description:
      "Development tokens: 100 each of compute, memory, sync and routing to the stack's alive sleeves; once a minute per stack (RATE_LIMITED with retryAfter otherwise).",
  },
  {
    name: 'claim_emissions',
    title: 'Claim emissions',
    method: 'POST',
    url: '/v1/treasury/claim',
    schema: { body: ClaimBody },
    rest: 'body',
    description: 'Claim the Treasury emissions a stack accrued (per epoch, scaled by CPV, decayed by EBC).',
  },
  {
    name: 'list_residues',
    title: 'List residues',
    method: 'GET',
    url: '/v1/coordination/residues',
    schema: { querystring: ResidueListQuery },
    rest: 'query',
    readOnly: true,
    description: 'Coordination residues (failures carrying token bounties), newest first, at most 50; filter by status (open: claimable), kind or stackId.',
  },
  {
    name: 'submit_residue_proof',
    title: 'Submit a residue proof',
    method: 'POST',
    url: '/v1/coordination/residues/:id/proof',
    schema: { params: ResidueIdParams, body: ProofBody },
    params: { id: 'residueId' },
    rest: 'body',
    description:
      'Submit a proof for an open residue; the first valid proof wins the full bounty, minted to the claimant stack. RESIDUE_NOT_OPEN (409) or INVALID_PROOF (422) otherwise.',
  },
];

export interface CompiledTool extends ToolDef {
  inputSchema: JsonSchema & { type: 'object' };
  validate: ValidateFunction;
}

/** A problem as the gateway writes one: {type?, title, status, detail, code, errors?, ...}. */
export type ProblemBody = Record<string, unknown> & { status: number; code: string; detail?: string };
export interface FieldProblem {
  path: string;
  message: string;
}

const objectOf = (s: JsonSchema | undefined) => ({
  properties: (s?.properties ?? {}) as Record<string, JsonSchema>,
  required: (s?.required ?? []) as string[],
});

/** Plain JSON (TypeBox schemas carry symbol keys). */
const plain = (s: unknown): JsonSchema | undefined => (s && typeof s === 'object' ? (JSON.parse(JSON.stringify(s)) as JsonSchema) : undefined);

/** The tool's argument schema: renamed path params (always required) + body or query properties; nothing else. */
export function toolSchema(def: ToolDef): JsonSchema & { type: 'object' } {
  const route = { params: plain(def.schema.params), querystring: plain(def.schema.querystring), body: plain(def.schema.body) };
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  const params = objectOf(route.params);
  for (const [param, arg] of Object.entries(def.params ?? {})) {
    properties[arg] = params.properties[param] ?? { type: 'string', minLength: 1 };
    required.push(arg);
  }
  const rest = objectOf(def.rest === 'query' ? route.querystring : def.rest === 'body' ? route.body : undefined);
  for (const [k, v] of Object.entries(rest.properties)) {
    if (k in properties) throw new Error(`tool ${def.name}: argument ${k} is both a path parameter and a ${def.rest} property`);
    properties[k] = v;
  }
  required.push(...rest.required);
  // additionalProperties: false so a misspelt argument is refused by name instead of silently dropped.
  return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
}

let compiled: CompiledTool[] | undefined;

export function compiledTools(): CompiledTool[] {
  return (compiled ??= TOOLS.map((def) => {
    const inputSchema = toolSchema(def);
    return { ...def, inputSchema, validate: ajv.compile(inputSchema) };
  }));
}

/** Ajv errors as the gateway's field problems (lib/http.ts): the path names the argument. */
export function fieldProblems(errors: ErrorObject[] | null | undefined): FieldProblem[] {
  return (errors ?? []).map((e) => {
    const p = e.params as { missingProperty?: string; additionalProperty?: string };
    const at = (e.instancePath || '').replace(/^\//, '').replace(/\//g, '.');
    const child = p.missingProperty ?? p.additionalProperty;
    const path = child ? (at ? `${at}.${child}` : child) : at || 'arguments';
    return { path, message: p.additionalProperty ? 'is not an argument of this tool' : (e.message ?? 'is invalid') };
  });
}

/** The 400 problem a refused call gets, shaped like the gateway's validation problem. */
export function argumentProblem(errors: FieldProblem[]): ProblemBody {
  return badRequest(`Invalid arguments: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors).toJSON() as ProblemBody;
}

export interface GatewayCall {
  method: string;
  path: string;
  body?: unknown;
}

/** The one gateway request a validated call makes. */
export function requestOf(tool: ToolDef, args: Record<string, unknown>): GatewayCall {
  const rest: Record<string, unknown> = { ...args };
  let path = tool.url;
  for (const [param, arg] of Object.entries(tool.params ?? {})) {
    path = path.replace(`:${param}`, encodeURIComponent(String(args[arg])));
    delete rest[arg];
  }
  if (tool.rest === 'query') {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(rest)) if (v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    return { method: tool.method, path: qs ? `${path}?${qs}` : path };
  }
  if (tool.rest === 'body') return { method: tool.method, path, body: rest };
  return { method: tool.method, path };
}
