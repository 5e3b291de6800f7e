// How the memory domain talks to the Hippocampus: over HTTP (distributed mode) or, when the
// composition root runs the Hippocampus in this process (it sets p.ports.hippocampus to
// localHippocampus), straight to its store. The local
// path takes the caller's transaction, which PGlite (one connection) needs: a write from another
// connection while the perceive transaction holds the database would wait for it forever.
// Over HTTP (lib/internal-client.ts) the client fails over: HIPPOCAMPUS_URL first, then
// HIPPOCAMPUS_FALLBACK_URLS, each attempt bounded by HIPPOCAMPUS_TIMEOUT_MS; no node answering is a
// 503 (unavailable).
import type { Tx } from '../../../lib/db/index.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { Problem } from '../../../lib/errors.ts';
import { internalClient } from '../../../lib/internal-client.ts';
import { hippocampusFailovers, hippocampusNodeFailures, hippocampusUnavailable } from '../../../lib/metrics.ts';
import { dagStats, dagWritesInEpoch, nodeMeta, pinStored, putNode, walkDag, type PutNodeInput, type WalkResult } from './store.ts';

export interface HippocampusClient {
  put(node: PutNodeInput, tx?: Tx): Promise<void>;
  pin(cid: string, tx?: Tx): Promise<void>;
  walk(root: string, depth: number, epoch: number): Promise<WalkResult>;
  meta(cid: string, tx?: Tx): Promise<NodeMeta | null>;
  /** CIDs written in an epoch, in write order (the Thalamus's ipfsRoot leaves). */
  epochWrites(epoch: number): Promise<string[]>;
  /** GET /stats: {nodes, peers, pinned} as the Hippocampus node sees them. */
  stats(): Promise<{ nodes: number; peers: number; pinned: number }>;
}

export interface NodeMeta {
  cid: string;
  stackId: string;
  epoch: number;
  links: string[];
  pinned: boolean;
  /** The payload is present in the object store. */
  stored: boolean;
}

declare module '../../../lib/platform.ts' {
  interface Ports {
    /** The Hippocampus this process's memory calls go to; unset: over HTTP to HIPPOCAMPUS_URL and its fallbacks. */
    hippocampus: HippocampusClient;
  }
}

export function localHippocampus(p: Platform): HippocampusClient {
  return {
    put: async (node, tx) => void (await putNode(tx ?? p.db.prisma, p.objects, node, p.epochs.current())),
    pin: async (cid, tx) => void (await pinStored(tx ?? p.db.prisma, cid)),
    walk: (root, depth, epoch) => walkDag(p.db, p.objects, root, depth, epoch),
    meta: (cid, tx) => nodeMeta(tx ?? p.db.prisma, p.objects, cid),
    epochWrites: (epoch) => dagWritesInEpoch(p.db.prisma, epoch),
    stats: () => dagStats(p),
  };
}

/**
 * The Hippocampus over HTTP, through the kernel's internal client. `baseUrls` is the primary then
 * its fallbacks: a connection error, a timeout or a 5xx moves on to the next node (every call is
 * idempotent: content-addressed puts, pins, walks and reads); a 4xx is the answer. When no node
 * answers: a 503 problem.
 */
export function httpHippocampus(baseUrls: string | string[], opts: { internalToken?: string; timeoutMs?: number } = {}): HippocampusClient {
  const client = internalClient({
    name: 'Hippocampus',
    baseUrls,
    token: opts.internalToken,
    timeoutMs: opts.timeoutMs ?? 2500,
    observe: {
      nodeFailed: (reason) => hippocampusNodeFailures.inc({ reason }),
      failedOver: () => hippocampusFailovers.inc(),
      unavailable: () => hippocampusUnavailable.inc(),
    },
  });
  const call = <T>(method: string, path: string, body?: unknown): Promise<T> => client.json<T>(method, path, body);
  return {
    put: async (node) => void (await call('PUT', '/dag', node)),
    pin: async (cid) => void (await call('POST', `/dag/${encodeURIComponent(cid)}/pin`)),
    walk: (root, depth, epoch) => call<WalkResult>('POST', '/recall', { root, depth, epoch }),
    epochWrites: async (epoch) => (await call<{ epoch: number; cids: string[] }>('GET', `/epochs/${epoch}/writes`)).cids,
    stats: async () => {
      const s = await call<{ nodes: number; peers: number; pinned: number }>('GET', '/stats');
      return { nodes: s.nodes, peers: s.peers, pinned: s.pinned };
    },
    meta: async (cid) => {
      try {
        return await call<NodeMeta>('GET', `/dag/${encodeURIComponent(cid)}/meta`);
      } catch (e) {
        if ((e as Problem).status === 404) return null;
        throw e;
      }
    },
  };
}

/** `timeoutMs` overrides HIPPOCAMPUS_TIMEOUT_MS per attempt (the Thalamus bounds its whole source read). */
export function hippocampusClient(p: Platform, opts: { timeoutMs?: number } = {}): HippocampusClient {
  if (p.ports.hippocampus) return p.ports.hippocampus;
  return httpHippocampus([p.config.urls.hippocampus, ...p.config.hippocampusFallbacks], {
    internalToken: p.config.internalToken,
    timeoutMs: opts.timeoutMs ?? p.config.hippocampusTimeoutMs,
  });
}
