// Maps an outbox intent (kind + payload) onto its contract call. Payload shapes are those of
// subgraphs/chains/outbox.ts; records are keyed on-chain by keccak256 of their platform id.
import { getAddress, id as keccakId, isAddress, solidityPackedKeccak256, ZeroHash } from 'ethers';
import { CHAIN_TOKENS, iface, type SuiteName } from './artifacts.ts';
import type { Deployment } from './deploy.ts';
import { settleArgs } from './settlement.ts';

/** A payload that can never become a valid call: the row fails without a transaction. */
export class IntentError extends Error {}

export interface ChainCall {
  contract: SuiteName;
  to: string;
  data: string;
}

/** stackId -> identity tokenId (from the payload, the Shape A id, or the stack's mintIdentity intent). */
export type TokenIdOf = (stackId: string) => Promise<number | undefined>;

export const recordKey = (platformId: string) => keccakId(platformId);

/** Tag of the platform's ValidationRegistry responses: an accepted residue proof. */
export const RESIDUE_PROOF_TAG = 'residue-proof';

/** JSON with object keys sorted at every level: the form a proof is hashed in (jsonb reorders keys). */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The proofHash recorded on Cortex for a residue proof: keccak256 of its canonical JSON. */
export const proofHashOf = (proof: unknown): string => keccakId(canonicalJson(proof));

/**
 * requestHash of a residue proof's validation on the ValidationRegistry: keccak256(residueKey ‖
 * proofHash), both as ResidueRegistry.residueOf records them, so anyone can find it from the residue.
 */
export function validationRequestHash(residueId: string, proofHash: string): string {
  return solidityPackedKeccak256(['bytes32', 'bytes32'], [recordKey(residueId), proofHash]);
}

const CPV_KEYS: Record<(typeof CHAIN_TOKENS)[number], string> = {
  compute: 'computeCoeff',
  memory: 'memoryCoeff',
  sync: 'syncCoeff',
  routing: 'routingCoeff',
  residue: 'residueCoeff',
};

/** CPV as five uint16 scaled by 1e3 in token order; accepts an array in that order or the spec's object. */
export function cpvToChain(cpv: unknown): number[] {
  let values: unknown[];
  if (Array.isArray(cpv)) values = cpv;
  else if (cpv && typeof cpv === 'object')
    values = CHAIN_TOKENS.map((t) => (cpv as Record<string, unknown>)[CPV_KEYS[t]] ?? (cpv as Record<string, unknown>)[t]);
  else throw new IntentError('cpv missing');
  if (values.length !== 5) throw new IntentError('cpv needs five coefficients');
  return values.map((v) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 2) throw new IntentError(`cpv coefficient out of [0, 2]: ${String(v)}`);
    return Math.round(v * 1000);
  });
}

function str(p: Record<string, unknown>, k: string): string {
  const v = p[k];
  if (typeof v !== 'string' || !v) throw new IntentError(`payload.${k} must be a non-empty string`);
  return v;
}

function int(p: Record<string, unknown>, k: string): number {
  const v = p[k];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new IntentError(`payload.${k} must be a non-negative integer`);
  return v;
}

function hex32(p: Record<string, unknown>, k: string): string {
  const v = p[k];
  if (typeof v !== 'string' || !/^(0x)?[0-9a-fA-F]{64}$/.test(v)) throw new IntentError(`payload.${k} must be 32 bytes of hex`);
  return v.startsWith('0x') ? v.toLowerCase() : `0x${v.toLowerCase()}`;
}

/** [{token, milli}] (ledger) or {token: units} (emission) -> parallel token ids and milli amounts. */
export function amountsToChain(amounts: unknown): { kinds: number[]; values: bigint[] } {
  const kinds: number[] = [];
  const values: bigint[] = [];
  const add = (token: unknown, milli: bigint) => {
    const i = CHAIN_TOKENS.indexOf(token as (typeof CHAIN_TOKENS)[number]);
    if (i < 0) throw new IntentError(`unknown token ${String(token)}`);
    if (milli < 0n) throw new IntentError('negative amount');
    if (milli > 0n) {
      kinds.push(i);
      values.push(milli);
    }
  };
  if (Array.isArray(amounts)) {
    for (const a of amounts as { token?: unknown; milli?: unknown }[]) {
      if (!a || typeof a !== 'object') throw new IntentError('amount must be {token, milli}');
      if (typeof a?.milli !== 'string' && typeof a?.milli !== 'number') throw new IntentError('amount.milli missing');
      let m: bigint;
      try {
        m = BigInt(a.milli);
      } catch {
        throw new IntentError('amount.milli is not an integer');
      }
      add(a.token, m);
    }
  } else if (amounts && typeof amounts === 'object') {
    for (const [token, units] of Object.entries(amounts as Record<string, unknown>)) {
      if (typeof units !== 'number' || !Number.isFinite(units)) throw new IntentError(`amount ${token} is not a number`);
      add(token, BigInt(Math.round(units * 1000)));
    }
  } else throw new IntentError('amounts missing');
  return { kinds, values };
}

/** The heads of an `updateStacks` payload ({heads: [{stackId, tokenId, head, epoch}]}), checked. */
export function headsOf(payload: Record<string, unknown>): Array<{ stackId: string; tokenId: number; head: string; epoch: number }> {
  const heads = payload.heads;
  if (!Array.isArray(heads) || !heads.length) throw new IntentError('payload.heads must be a non-empty list');
  return heads.map((h: Record<string, unknown>) => {
    if (!h || typeof h !== 'object') throw new IntentError('payload.heads[] must be {stackId, tokenId, head, epoch}');
    return { stackId: str(h, 'stackId'), tokenId: int(h, 'tokenId'), head: str(h, 'head'), epoch: int(h, 'epoch') };
  });
}

/** The identity NFT's holder: the payload's EVM address, else the operator (platform custody). */
export function ownerAddress(owner: unknown, operator: string): string {
  return typeof owner === 'string' && isAddress(owner) ? getAddress(owner) : operator;
}

export async function buildCall(kind: string, payload: Record<string, unknown>, suite: Deployment, tokenIdOf: TokenIdOf): Promise<ChainCall> {
  const call = (contract: SuiteName, fn: string, args: unknown[]): ChainCall => ({
    contract,
    to: suite.contracts[contract],
    data: iface(contract).encodeFunctionData(fn, args),
  });
  const stackToken = async (k = 'stackId'): Promise<number> => {
    if (typeof payload.tokenId === 'number' && k === 'stackId') return int(payload, 'tokenId');
    const t = await tokenIdOf(str(payload, k));
    if (t === undefined) throw new IntentError(`no identity token for ${String(payload[k])}`);
    return t;
  };
  switch (kind) {
    case 'mintIdentity': {
      // agentURI: the stack's ERC-8004 registration file (intents from before it carry none).
      const uri = payload.agentURI;
      if (uri !== undefined && typeof uri !== 'string') throw new IntentError('payload.agentURI must be a string');
      return call('StackIdentity', 'mint', [
        ownerAddress(payload.owner, suite.operator),
        int(payload, 'tokenId'),
        cpvToChain(payload.cpv),
        str(payload, 'stackId'),
        uri ?? '',
      ]);
    }
    case 'updateStack': {
      const head = payload.episodicHead;
      if (head !== null && head !== undefined && typeof head !== 'string') throw new IntentError('payload.episodicHead must be a string or null');
      const tokenId = await stackToken();
      if (payload.cpv !== undefined && payload.epoch === undefined) return call('StackIdentity', 'updateCpv', [tokenId, cpvToChain(payload.cpv)]);
      return call('StackIdentity', 'updateStack', [tokenId, int(payload, 'epoch'), head ?? '']);
    }
    case 'updateStacks': {
      const heads = headsOf(payload);
      return call('StackIdentity', 'updateStacks', [heads.map((h) => h.tokenId), heads.map((h) => h.epoch), heads.map((h) => h.head)]);
    }
    case 'spawnSleeve':
      return call('SleeveRegistry', 'spawn', [str(payload, 'sleeveId'), await stackToken(), str(payload, 'kind')]);
    case 'decommissionSleeve':
      return call('SleeveRegistry', 'decommission', [recordKey(str(payload, 'sleeveId'))]);
    case 'mint':
    case 'burn': {
      const { kinds, values } = amountsToChain(payload.amounts);
      if (!kinds.length) throw new IntentError('nothing to mint or burn');
      return call('BandwidthToken', kind === 'mint' ? 'mintBatch' : 'burnBatch', [await stackToken(), kinds, values]);
    }
    case 'settle':
      return call('BandwidthToken', 'settle', settleArgs(payload));
    case 'anchor':
      return call('EpochAnchor', 'anchor', [
        int(payload, 'epoch'),
        hex32(payload, 'crossRoot'),
        hex32(payload, 'evmRoot'),
        hex32(payload, 'ipfsRoot'),
        hex32(payload, 'sleevesRoot'),
      ]);
    case 'route': {
      // A saga that compensates after its anchor step marks its recorded route compensated.
      if (payload.status === 'compensated') return call('NeedlecastRouter', 'compensate', [str(payload, 'sagaId')]);
      const shards = payload.shards;
      let count: number;
      if (Array.isArray(shards)) count = shards.length;
      else if (typeof shards === 'number' && Number.isSafeInteger(shards) && shards >= 0) count = shards;
      else throw new IntentError('payload.shards must be a count or a list');
      const hash =
        typeof payload.routeHash === 'string' ? hex32(payload, 'routeHash') : Array.isArray(shards) ? keccakId(shards.map(String).join('\n')) : ZeroHash;
      return call('NeedlecastRouter', 'recordRoute', [str(payload, 'sagaId'), await stackToken(), str(payload, 'from'), str(payload, 'to'), count, hash]);
    }
    case 'openResidue':
      return call('ResidueRegistry', 'open', [str(payload, 'residueId'), str(payload, 'kind'), int(payload, 'bountyMilli')]);
    case 'claimResidue': {
      const claimant = str(payload, 'claimant');
      // A claimant that is a stack is paid on its identity token; anyone else on token 0 (unassigned).
      const claimantToken = (await tokenIdOf(claimant)) ?? 0;
      const proof = typeof payload.proofHash === 'string' ? hex32(payload, 'proofHash') : ZeroHash;
      return call('ResidueRegistry', 'claim', [recordKey(str(payload, 'residueId')), claimantToken, claimant, proof]);
    }
    case 'validationRequest': {
      // The platform asks its validator (the operator) about the claimant stack's residue proof.
      const proof = hex32(payload, 'proofHash');
      return call('ValidationRegistry', 'validationRequest', [
        suite.operator,
        await stackToken('claimant'),
        str(payload, 'requestURI'),
        validationRequestHash(str(payload, 'residueId'), proof),
      ]);
    }
    case 'validationResponse': {
      const proof = hex32(payload, 'proofHash');
      const response = int(payload, 'response');
      if (response > 100) throw new IntentError('payload.response must be in [0, 100]');
      const uri = typeof payload.responseURI === 'string' ? payload.responseURI : '';
      return call('ValidationRegistry', 'validationResponse', [
        validationRequestHash(str(payload, 'residueId'), proof),
        response,
        uri,
        proof,
        RESIDUE_PROOF_TAG,
      ]);
    }
    case 'emission': {
      // Per epoch (treasury-emitter: {epoch, stacks, totalsMilli}) or per stack ({stackId, epoch, amounts}).
      if (payload.stackId === undefined && payload.totalsMilli !== undefined) {
        const { kinds, values } = amountsToChain(Object.entries(payload.totalsMilli as Record<string, unknown>).map(([token, milli]) => ({ token, milli })));
        const totals = [0n, 0n, 0n, 0n];
        kinds.forEach((k, i) => {
          if (k > 3) throw new IntentError('epoch emission has core tokens only');
          totals[k] += values[i];
        });
        return call('QuellistTreasury', 'recordEpochEmission', [int(payload, 'epoch'), int(payload, 'stacks'), totals]);
      }
      const { kinds, values } = amountsToChain(payload.amounts);
      const amounts = [0n, 0n, 0n, 0n, 0n];
      kinds.forEach((k, i) => (amounts[k] += values[i]));
      return call('QuellistTreasury', 'recordEmission', [await stackToken(), int(payload, 'epoch'), amounts]);
    }
    default:
      throw new IntentError(`unknown intent kind ${kind}`);
  }
}
