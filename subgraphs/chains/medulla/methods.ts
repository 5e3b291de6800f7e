// The RPC methods of a Medulla node. Params positional (as listed) or named.
//   getinfo                                      -> {difficulty, epoch, height, tip}
//   getblock [height]                            -> Block (main chain)
//   getblockbyhash [hash]                        -> Block (any block the node stores)
//   getheaders [fromHeight, count<=500]          -> Block[] (main chain)
//   getsynapticproof [height, atHeight?]         -> {height, blockHash, atHeight, root, proof}
//   submitcoherenceroot [epoch, crossRoot, evmRoot, ipfsRoot, sleevesRoot, operator?, signature?]
//                                                -> {accepted, epoch, crossRoot, operator, equivocation}
//   getcoherence [epoch]                         -> {epoch, blockHash, height, crossRoot, ...} | null
//   submitblock [block, fromUrl?]                -> {accepted, status, height, hash}
//   mineblock []                                 -> Block (mined now, queued behind other requests)
import { isHex } from '../../../lib/crypto.ts';
import { SYNAPTIC_WINDOW } from '../../../lib/mmr.ts';
import { blockJson } from './header.ts';
import type { MedullaNode } from './node.ts';
import { BLOCK_REJECTED, invalidParams, NOT_FOUND, param, RpcError, UNAVAILABLE, type Method, type Params } from './rpc.ts';
import { HeaderError } from './validate.ts';

function uintParam(params: Params, i: number, name: string, optional = false): number | undefined {
  const v = param(params, i, name);
  if (v === undefined && optional) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalidParams(`${name} must be a non-negative integer`);
  return v;
}

function hashParam(params: Params, i: number, name: string, optional = false): string | undefined {
  const v = param(params, i, name);
  if (v === undefined && optional) return undefined;
  if (!isHex(v, 32)) throw invalidParams(`${name} must be 64 hex characters`);
  return (v as string).toLowerCase();
}

const notFound = (what: string) => new RpcError(NOT_FOUND, `${what} not found`);

export function medullaMethods(node: () => MedullaNode): Record<string, Method> {
  return {
    getinfo: () => node().chain.info(),

    getblock: async (params) => {
      const height = uintParam(params, 0, 'height')!;
      const b = await node().chain.atHeight(height);
      if (!b) throw notFound(`block at height ${height}`);
      return blockJson(b);
    },

    getblockbyhash: async (params) => {
      const hash = hashParam(params, 0, 'hash')!;
      const b = await node().chain.block(hash);
      if (!b) throw notFound(`block ${hash}`);
      return blockJson(b);
    },

    getheaders: async (params) => {
      const from = uintParam(params, 0, 'fromHeight')!;
      const count = uintParam(params, 1, 'count', true) ?? 100;
      if (count > 500) throw invalidParams('count must be at most 500');
      return (await node().chain.range(from, count)).map(blockJson);
    },

    getsynapticproof: async (params) => {
      const chain = node().chain;
      const height = uintParam(params, 0, 'height')!;
      const tip = chain.tip().height;
      const atHeight = uintParam(params, 1, 'atHeight', true) ?? tip;
      if (height > tip) throw notFound(`block at height ${height}`);
      if (atHeight > tip) throw notFound(`block at height ${atHeight}`);
      if (height >= atHeight) throw invalidParams(`block ${height} is committed only by a later block (atHeight > height)`);
      if (height < atHeight - SYNAPTIC_WINDOW) throw invalidParams(`block ${height} is outside the ${SYNAPTIC_WINDOW}-block window of block ${atHeight}`);
      const [block, committer, field] = await Promise.all([chain.atHeight(height), chain.atHeight(atHeight), chain.fieldCommittedAt(atHeight)]);
      return { height, blockHash: block!.blockHash, atHeight, root: committer!.synapticFieldRoot, proof: field.proof(block!.blockHash) };
    },

    submitcoherenceroot: (params) => {
      const epoch = uintParam(params, 0, 'epoch')!;
      const crossRoot = hashParam(params, 1, 'crossRoot')!;
      const evmRoot = hashParam(params, 2, 'evmRoot')!;
      const ipfsRoot = hashParam(params, 3, 'ipfsRoot')!;
      const sleevesRoot = hashParam(params, 4, 'sleevesRoot')!;
      const operator = hashParam(params, 5, 'operator', true);
      const signature = param(params, 6, 'signature');
      if (signature !== undefined && !isHex(signature, 64)) throw invalidParams('signature must be 128 hex characters');
      if (signature !== undefined && operator === undefined) throw invalidParams('a signature needs its operator public key');
      return node().submitCoherence({ epoch, crossRoot, evmRoot, ipfsRoot, sleevesRoot }, operator, (signature as string | undefined)?.toLowerCase());
    },

    getcoherence: async (params) => {
      const epoch = uintParam(params, 0, 'epoch')!;
      const b = await node().chain.committedBlock(epoch);
      if (!b) return null;
      return { epoch, blockHash: b.blockHash, height: b.height, crossRoot: b.crossRoot, evmRoot: b.evmRoot, ipfsRoot: b.ipfsRoot, sleevesRoot: b.sleevesRoot };
    },

    submitblock: async (params) => {
      const raw = param(params, 0, 'block');
      const from = param(params, 1, 'from');
      if (from !== undefined && (typeof from !== 'string' || !/^https?:\/\/[^\s]+$/.test(from))) throw invalidParams('from must be an http(s) URL');
      try {
        const status = await node().receiveBlock(raw, from as string | undefined);
        const b = raw as { height: number; blockHash: string };
        return { accepted: true, status, height: b.height, hash: b.blockHash };
      } catch (e) {
        if (e instanceof HeaderError) throw new RpcError(BLOCK_REJECTED, `block rejected: ${e.message}`, { reason: e.code });
        throw e;
      }
    },

    mineblock: async () => {
      try {
        return await node().mineNow();
      } catch (e) {
        throw new RpcError(UNAVAILABLE, (e as Error).message);
      }
    },
  };
}
