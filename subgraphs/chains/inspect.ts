// What an inspector reads about the chains as a whole: the newest Medulla blocks (their ts give the
// block intervals), the newest coherence tuples the Thalamus folded with their gaps, and whether
// each service behind the gateway answers its health check.
import type { Platform } from '../../lib/platform.ts';
import { badRequest } from '../../lib/errors.ts';
import { internalAuthHeaders } from '../../lib/internal-client.ts';
import { getBlock, getInfo } from './medulla/client.ts';
import type { Block } from './medulla/header.ts';

export const RECENT_MAX = 64;

function checkLast(last: number): number {
  if (!Number.isInteger(last) || last < 1 || last > RECENT_MAX)
    throw badRequest(`last must be an integer from 1 to ${RECENT_MAX}`, [{ path: 'last', message: 'is out of range' }]);
  return last;
}

/** The newest `last` main-chain blocks, newest first (fewer near genesis). */
export async function recentBlocks(p: Platform, last: number): Promise<Block[]> {
  checkLast(last);
  const opts = { timeoutMs: 3000, token: p.config.internalToken };
  const info = await getInfo(p.config.urls.medulla, opts);
  const heights = Array.from({ length: Math.min(last, info.height + 1) }, (_, i) => info.height - i);
  return Promise.all(heights.map((h) => getBlock(p.config.urls.medulla, h, p.config.internalToken)));
}

export interface CoherenceTuple {
  epoch: number;
  crossRoot: string;
  evmRoot: string;
  ipfsRoot: string;
  sleevesRoot: string;
  gaps: string[];
  submitted: boolean;
  blockHash: string | null;
  blockHeight: number | null;
  chainStatus: string;
}

/** The newest `last` folded tuples (EpochAnchor rows), newest first; `gaps` names the chains a fold could not read. */
export async function coherenceTuples(p: Platform, last: number): Promise<CoherenceTuple[]> {
  checkLast(last);
  return p.db.prisma.epochAnchor.findMany({
    orderBy: { epoch: 'desc' },
    take: last,
    select: {
      epoch: true,
      crossRoot: true,
      evmRoot: true,
      ipfsRoot: true,
      sleevesRoot: true,
      gaps: true,
      submitted: true,
      blockHash: true,
      blockHeight: true,
      chainStatus: true,
    },
  });
}

export interface ServiceHealth {
  name: string;
  ok: boolean;
  latencyMs: number;
  detail: string | null;
}

async function probe(name: string, check: () => Promise<Response>): Promise<ServiceHealth> {
  const t0 = performance.now();
  try {
    const r = await check();
    await r.body?.cancel();
    return { name, ok: r.ok, latencyMs: Math.round(performance.now() - t0), detail: r.ok ? null : `HTTP ${r.status}` };
  } catch (e) {
    // The reason only: never the internal address.
    return { name, ok: false, latencyMs: Math.round(performance.now() - t0), detail: (e as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable' };
  }
}

/** Each service's health check as the gateway sees it (1.5 s each, all at once). */
export function servicesHealth(p: Platform): Promise<ServiceHealth[]> {
  const u = p.config.urls;
  const headers = internalAuthHeaders(p.config.internalToken);
  const get = (url: string) => () => fetch(`${url}/health`, { headers, signal: AbortSignal.timeout(1500) });
  return Promise.all([
    probe('medulla', get(u.medulla)),
    probe('hippocampus', get(u.hippocampus)),
    probe('cortex', () =>
      fetch(u.cortex, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        signal: AbortSignal.timeout(1500),
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
      }),
    ),
    probe('thalamus', get(u.thalamus)),
    probe('dhf', get(u.dhf)),
    probe('needlecast', get(u.needlecast)),
    probe('treasury', get(u.treasury)),
    probe('faucet', get(u.faucet)),
  ]);
}
