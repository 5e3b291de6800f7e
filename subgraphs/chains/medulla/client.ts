// Medulla's JSON-RPC 2.0 for the gateway, the Thalamus and peers, over the kernel's internal
// client (lib/internal-client.ts): the internal bearer token, a timeout, problem+json mapping.
import { internalClient, RpcError } from '../../../lib/internal-client.ts';
import type { Block } from './header.ts';

export interface ChainInfo {
  difficulty: number;
  epoch: number;
  height: number;
  tip: string;
}

/** Medulla's error answer to a call (its JSON-RPC error code, message and data). */
export { RpcError as MedullaRpcError };

/**
 * Calls `method` on the Medulla node at `url`; throws MedullaRpcError for an RPC error answer, a
 * 503 Problem (unavailable) when the node does not answer. Medulla is internal: every caller in the
 * platform (gateway, Thalamus, peers, resolvers) passes its validated config's internal token.
 */
export function medullaRpc<T = unknown>(
  url: string,
  method: string,
  params: unknown[] | Record<string, unknown> = [],
  opts: { timeoutMs?: number; token?: string } = {},
): Promise<T> {
  return internalClient({ name: 'Medulla', baseUrls: url, token: opts.token, timeoutMs: opts.timeoutMs ?? 5000 }).rpc<T>(method, params);
}

export const getInfo = (url: string, opts?: { timeoutMs?: number; token?: string }) => medullaRpc<ChainInfo>(url, 'getinfo', [], opts);

export const getBlock = (url: string, height: number, token?: string) => medullaRpc<Block>(url, 'getblock', [height], { token });
