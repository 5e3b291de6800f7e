// Stacks: persistent identities. Two creation shapes (spec: Stack):
//  A {name, kind?, cpv?} -> id `stack:<kind>:<tokenId>:<12 hex>`, keypair generated here,
//                       identityPriv returned once, cpv all 1 unless given;
//  B {pubkey, cpv}   -> id `stack:<address(pubkey)>`, the client holds the key.
// The master secret (root of per-epoch keys) is random, stored only wrapped under p.masterKey.
import { randomBytes } from 'node:crypto';
import * as ed from '@noble/ed25519';
import type { Db, Tx } from '../../lib/db/index.ts';
import type { Platform } from '../../lib/platform.ts';
import { badRequest, conflict, notFound } from '../../lib/errors.ts';
import { generateIdentity, randomSecret, unwrapSecret, wrapSecret } from '../../lib/crypto.ts';
import { stackAddress } from '../../lib/address.ts';
import { recordEvent } from '../../lib/events.ts';
import { enqueueChainTx, anchorsOfStacks, type StackAnchor } from '../chains/index.ts';
import { balancesOf, sleeveAccount, zeroAmounts, TOKENS, type TokenAmounts } from '../economy/index.ts';
import { sleeveView, type SleeveView } from '../sleeves/index.ts';
import type { Stack as StackRow, Sleeve as SleeveRow } from '../../generated/prisma/client.ts';

export type { StackRow };

export const STACK_KINDS = ['human', 'ai', 'mining', 'memory'] as const;
export type StackKind = (typeof STACK_KINDS)[number];
export const CPV_KEYS = ['syncCoeff', 'memoryCoeff', 'computeCoeff', 'residueCoeff', 'routingCoeff'] as const;
export type Cpv = Record<(typeof CPV_KEYS)[number], number>;

export interface CreateStackInput {
  name?: unknown;
  kind?: unknown;
  pubkey?: unknown;
  cpv?: unknown;
}

export interface StackView {
  id: string;
  tokenId: number;
  name: string;
  kind: string;
  pubKey: string;
  pubkey: string;
  epoch: number;
  cpv: Cpv;
  binding: { floor: number; decayRate: number };
  createdAt: string;
  episodicHead: string | null;
  lastActiveEpoch: number;
  chainStatus: string;
  sleeves: SleeveView[];
  anchors: StackAnchor[];
  balances: TokenAmounts;
  identityPriv?: string;
}

// Validation lives here (not only in the route schema) so GraphQL and REST refuse the same things.
function parseKind(kind: unknown): StackKind {
  if (kind === undefined || kind === null) return 'human';
  if (typeof kind !== 'string' || !(STACK_KINDS as readonly string[]).includes(kind)) {
    throw badRequest(`kind must be one of ${STACK_KINDS.join(', ')}`, [{ path: 'kind', message: 'is not a known kind' }]);
  }
  return kind as StackKind;
}

function parseName(name: unknown, required: boolean): string | undefined {
  if (name === undefined && !required) return undefined;
  if (typeof name !== 'string' || name.trim() === '' || name.length > 200) {
    throw badRequest('name must be a non-empty string of at most 200 characters', [{ path: 'name', message: 'is invalid' }]);
  }
  return name;
}

function parsePubkey(pubkey: unknown): string {
  if (typeof pubkey !== 'string' || !/^[0-9a-fA-F]{64}$/.test(pubkey)) {
    throw badRequest('pubkey must be 64 hex characters (a 32-byte ed25519 public key)', [{ path: 'pubkey', message: 'is not 64 hex' }]);
  }
  const hex = pubkey.toLowerCase();
  try {
    ed.Point.fromHex(hex);
  } catch {
    throw badRequest('pubkey is not a valid ed25519 public key', [{ path: 'pubkey', message: 'is not a curve point' }]);
  }
  return hex;
}

/** `partial`: a coefficient left out is 1 (Shape A, where cpv is optional); Shape B needs all five. */
function parseCpv(cpv: unknown, partial = false): Cpv {
  if (cpv === null || typeof cpv !== 'object' || Array.isArray(cpv)) {
    throw badRequest('cpv must be an object with syncCoeff, memoryCoeff, computeCoeff, residueCoeff, routingCoeff', [{ path: 'cpv', message: 'is required' }]);
  }
  const out = {} as Cpv;
  const errors = [];
  for (const k of CPV_KEYS) {
    const v = (cpv as Record<string, unknown>)[k] ?? (partial ? 1 : undefined);
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 2) errors.push({ path: `cpv.${k}`, message: 'must be a number in [0, 2]' });
    else out[k] = v;
  }
  if (errors.length) throw badRequest(`cpv coefficients must be numbers in [0, 2]: ${errors.map((e) => e.path).join(', ')}`, errors);
  return out;
}

const cpvOf = (r: StackRow): Cpv => ({
  syncCoeff: r.syncCoeff, memoryCoeff: r.memoryCoeff, computeCoeff: r.computeCoeff, residueCoeff: r.residueCoeff, routingCoeff: r.routingCoeff,
});

async function nextTokenId(tx: Tx): Promise<number> {
  const rows = await tx.$queryRaw<{ v: bigint }[]>`SELECT nextval(pg_get_serial_sequence('"Stack"', 'tokenId')) AS v`;
  return Number(rows[0].v);
}

const isUniqueViolation = (e: unknown) => (e as { code?: string })?.code === 'P2002' || /unique/i.test(String((e as Error)?.message));

/** The agentURI of a platform stack: its ERC-8004 registration file on the gateway's public URL (COG_BASE_URL). */
export function registrationUrl(base: string, stackId: string): string {
  return `${base.replace(/\/+$/, '')}/v1/stacks/${encodeURIComponent(stackId)}/registration.json`;
}

/** Creates a stack in either shape; the creation response alone carries identityPriv (Shape A). */
export async function createStack(p: Platform, input: CreateStackInput): Promise<StackView> {
  if (input === null || typeof input !== 'object') throw badRequest('body must be an object');
  const shapeB = input.pubkey !== undefined;
  const kind = parseKind(input.kind);
  let pubKey: string;
  let identityPriv: string | undefined;
  let cpv: Cpv;
  let name: string | undefined;
  if (shapeB) {
    pubKey = parsePubkey(input.pubkey);
    cpv = parseCpv(input.cpv);
    name = parseName(input.name, false);
  } else {
    name = parseName(input.name, true);
    const id = generateIdentity();
    pubKey = id.pubKey;
    identityPriv = id.identityPriv;
    // Each 1 when created with a name only; a cpv sent along is checked like Shape B's (a value
    // out of [0, 2] is a 400, not silently dropped), the coefficients it leaves out are 1.
    cpv = parseCpv(input.cpv ?? {}, true);
  }
  if (shapeB && (await p.db.prisma.stack.findUnique({ where: { pubKey } }))) throw conflict('a stack with this pubkey already exists', 'STACK_EXISTS');
  const epoch = p.epochs.current();
  let row: StackRow;
  try {
    row = await p.db.prisma.$transaction(async (tx) => {
      const tokenId = await nextTokenId(tx);
      const owner = stackAddress(pubKey);
      const id = shapeB ? `stack:${owner}` : `stack:${kind}:${tokenId}:${randomBytes(6).toString('hex')}`;
      const created = await tx.stack.create({
        data: {
          id, tokenId, name: name ?? owner, kind, shape: shapeB ? 'B' : 'A', pubKey, ...cpv,
          masterSecret: wrapSecret(p.masterKey, randomSecret(32), id),
          // Emission decays from the last epoch the stack was active; creation is activity.
          lastActiveEpoch: epoch,
        },
      });
      await enqueueChainTx(tx, { kind: 'mintIdentity', ref: id, payload: { stackId: id, tokenId, owner, cpv, agentURI: registrationUrl(p.config.urls.base, id) }, epoch });
      await recordEvent(tx, {
        subject: `cog.stack.created.${id}`, type: 'stack.created',
        data: { stackId: id, tokenId, kind, pubKey, shape: created.shape }, msgId: `stack-created:${id}`,
      });
      return created;
    });
  } catch (e) {
    if (isUniqueViolation(e)) throw conflict('a stack with this pubkey already exists', 'STACK_EXISTS');
    throw e;
  }
  // A new stack has no sleeves and has written no memory, so no anchors.
  const view = await stackView(p, row, { sleeves: [], anchors: [] });
  if (identityPriv) view.identityPriv = identityPriv;
  return view;
}

/** The stack row, or a 404 Problem. */
export async function getStackRow(db: Db | Tx, id: string): Promise<StackRow> {
  const row = typeof id === 'string' && id ? await db.stack.findUnique({ where: { id } }) : null;
  if (!row) throw notFound('Stack', String(id));
  return row;
}

/** Locks the stack row for the rest of the transaction: per-stack writes are serialised here. */
export async function lockStack(tx: Tx, id: string): Promise<StackRow> {
  await tx.$executeRaw`SELECT 1 FROM "Stack" WHERE id = ${id} FOR UPDATE`;
  return getStackRow(tx, id);
}

/** Sum of the alive sleeves' balances per stack. */
async function aliveTotals(db: Db | Tx, sleeves: SleeveRow[]): Promise<{ totals: Map<string, TokenAmounts>; bySleeve: Map<string, TokenAmounts> }> {
  const alive = sleeves.filter((s) => s.alive);
  const bySleeveAcct = await balancesOf(db, alive.map((s) => sleeveAccount(s.id)));
  const totals = new Map<string, TokenAmounts>();
  const bySleeve = new Map<string, TokenAmounts>();
  for (const s of alive) {
    const b = bySleeveAcct.get(sleeveAccount(s.id))!;
    bySleeve.set(s.id, b);
    const t = totals.get(s.stackId) ?? zeroAmounts();
    for (const k of TOKENS) t[k] = (Math.round(t[k] * 1000) + Math.round(b[k] * 1000)) / 1000;
    totals.set(s.stackId, t);
  }
  return { totals, bySleeve };
}

function viewOf(r: StackRow, sleeves: SleeveRow[], totals: Map<string, TokenAmounts>, bySleeve: Map<string, TokenAmounts>, anchors: StackAnchor[]): StackView {
  return {
    id: r.id, tokenId: r.tokenId, name: r.name, kind: r.kind, pubKey: r.pubKey, pubkey: r.pubKey, epoch: r.epoch, cpv: cpvOf(r),
    binding: { floor: r.bindingFloor, decayRate: r.bindingDecay }, createdAt: r.createdAt.toISOString(), episodicHead: r.episodicHead,
    lastActiveEpoch: r.lastActiveEpoch, chainStatus: r.chainStatus,
    sleeves: sleeves.map((s) => sleeveView(s, bySleeve.get(s.id) ?? zeroAmounts())),
    anchors,
    balances: totals.get(r.id) ?? zeroAmounts(),
  };
}

/** The union read of one stack (both shapes): sleeves (alive or not), anchors, balances. */
export async function stackView(p: Platform, row: StackRow, opts: { sleeves?: SleeveRow[]; anchors?: StackAnchor[]; db?: Db | Tx } = {}): Promise<StackView> {
  const db = opts.db ?? p.db.prisma;
  const sleeves = opts.sleeves ?? (await db.sleeve.findMany({ where: { stackId: row.id }, orderBy: { seq: 'asc' } }));
  const { totals, bySleeve } = await aliveTotals(db, sleeves);
  const anchors = opts.anchors ?? (await anchorsOfStacks(db, [row.id])).get(row.id)!;
  return viewOf(row, sleeves, totals, bySleeve, anchors);
}

/** Every stack, oldest first, each with its sleeves and anchors; five queries whatever the count. */
export async function listStacks(p: Platform): Promise<StackView[]> {
  const rows = await p.db.prisma.stack.findMany({ orderBy: { tokenId: 'asc' } });
  const sleeves = await p.db.prisma.sleeve.findMany({ where: { stackId: { in: rows.map((r) => r.id) } }, orderBy: { seq: 'asc' } });
  const { totals, bySleeve } = await aliveTotals(p.db.prisma, sleeves);
  const byStack = new Map<string, SleeveRow[]>();
  for (const s of sleeves) byStack.set(s.stackId, [...(byStack.get(s.stackId) ?? []), s]);
  const anchors = await anchorsOfStacks(p.db.prisma, rows.map((r) => r.id));
  return rows.map((r) => viewOf(r, byStack.get(r.id) ?? [], totals, bySleeve, anchors.get(r.id) ?? []));
}

/** Unwraps the stack's master secret. Internal only: never log, return or publish it. */
export function stackMasterSecret(p: Platform, row: Pick<StackRow, 'id' | 'masterSecret'>): Uint8Array {
  return unwrapSecret(p.masterKey, row.masterSecret, row.id);
}

/** Moves the episodic head (callers hold the stack lock). */
export async function setEpisodicHead(tx: Tx, stackId: string, cid: string, meta: { sleeveId?: string; epoch?: number } = {}): Promise<void> {
  const row = await tx.stack.update({
    where: { id: stackId },
    data: {
      episodicHead: cid,
      ...(meta.epoch !== undefined ? { epoch: meta.epoch, lastActiveEpoch: meta.epoch, headEpoch: meta.epoch } : {}),
      ...(meta.sleeveId !== undefined ? { headSleeveId: meta.sleeveId } : {}),
    },
    select: { tokenId: true, epoch: true },
  });
  // Mirror the head and epoch on the identity NFT. Coalesced: while an update for this stack is
  // still waiting in the outbox it is rewritten in place, so a burst of perceives costs one
  // Cortex transaction, not one each.
  const payload = { stackId, tokenId: row.tokenId, epoch: row.epoch, episodicHead: cid };
  const waiting = await tx.chainOutbox.updateMany({ where: { kind: 'updateStack', ref: stackId, status: 'pending' }, data: { payload } });
  if (waiting.count === 0) await enqueueChainTx(tx, { kind: 'updateStack', ref: stackId, payload, epoch: meta.epoch });
}
