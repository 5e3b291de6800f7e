// A small Medulla RPC client (JSON-RPC 2.0 over HTTP) for the gateway, the Thalamus and peers.
import type { Block } from './header.ts';

export interface ChainInfo {
  difficulty: number;
  epoch: number;
  height: number;
  tip: string;
}

export class MedullaRpcError extends Error {
  constructor(
    public readonly code: number,
    message: string,
    public readonly data?: unknown,
  ) {
    super(message);
    this.name = 'MedullaRpcError';
  }
}

let nextId = 1;

/** Calls `method`; throws MedullaRpcError for an RPC error, or the fetch error when unreachable. */
export async function medullaRpc<T = unknown>(
  url: string,
  method: string,
  params: unknown[] | Record<string, unknown> = [],
  opts: { timeoutMs?: number; token?: string } = {},
): Promise<T> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  // Medulla is internal: every caller in the platform (gateway, Thalamus, peers, resolvers) passes
  // its validated config's internal token (p.config.internalToken).
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(`${url.replace(/\/+$/, '')}/rpc`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 5000),
  });
  const body = (await res.json().catch(() => null)) as { result?: T; error?: { code: number; message: string; data?: unknown } } | null;
  if (!body) throw new MedullaRpcError(-32603, `medulla answered HTTP ${res.status} without JSON`);
  if (body.error) throw new MedullaRpcError(body.error.code, body.error.message, body.error.data);
  return body.result as T;
}

export const getInfo = (url: string, opts?: { timeoutMs?: number; token?: string }) => medullaRpc<ChainInfo>(url, 'getinfo', [], opts);

export const getBlock = (url: string, height: number, token?: string) => medullaRpc<Block>(url, 'getblock', [height], { token });
