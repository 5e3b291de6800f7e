// How the memory domain talks to the Hippocampus: over HTTP (distributed mode) or, when the
// Hippocampus runs in this process (p.local has 'hippocampus'), straight to its store. The local
// path takes the caller's transaction, which PGlite (one connection) needs: a write from another
// connection while the perceive transaction holds the database would wait for it forever.
import type { Tx } from '../../../lib/db/index.ts';
import type { Platform } from '../../../lib/platform.ts';
import { Problem, unavailable } from '../../../lib/errors.ts';
import { dagStats, nodeMeta, pinStored, putNode, walkDag, type PutNodeInput, type WalkResult } from './store.ts';

export interface HippocampusClient {
  put(node: PutNodeInput, tx?: Tx): Promise<void>;
  pin(cid: string, tx?: Tx): Promise<void>;
  walk(root: string, depth: number, epoch: number): Promise<WalkResult>;
  meta(cid: string, tx?: Tx): Promise<NodeMeta | null>;
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

export const HIPPOCAMPUS_LOCAL = 'hippocampus';

export function localHippocampus(p: Platform): HippocampusClient {
  return {
    put: async (node, tx) => void (await putNode(tx ?? p.db.prisma, p.objects, node, p.epochs.current())),
    pin: async (cid, tx) => void (await pinStored(tx ?? p.db.prisma, cid)),
    walk: (root, depth, epoch) => walkDag(p.db.prisma, p.objects, root, depth, epoch),
    meta: (cid, tx) => nodeMeta(tx ?? p.db.prisma, p.objects, cid),
    stats: () => dagStats(p),
  };
}

export function httpHippocampus(baseUrl: string, opts: { internalToken?: string; timeoutMs?: number } = {}): HippocampusClient {
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    let res: Response;
    try {
      res = await fetch(`${baseUrl}${path}`, {
        method,
        headers: { 'content-type': 'application/json', ...(opts.internalToken ? { authorization: `Bearer ${opts.internalToken}` } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000),
      });
    } catch {
      throw unavailable('the Hippocampus is not reachable');
    }
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (res.ok) return json as T;
    if (res.status >= 500) throw unavailable(`the Hippocampus answered ${res.status}`);
    throw new Problem(res.status, String(json.code ?? 'HIPPOCAMPUS'), String(json.title ?? 'Hippocampus refused'), String(json.detail ?? ''));
  };
  return {
    put: async (node) => void (await call('PUT', '/dag', node)),
    pin: async (cid) => void (await call('POST', `/dag/${encodeURIComponent(cid)}/pin`)),
    walk: (root, depth, epoch) => call<WalkResult>('POST', '/recall', { root, depth, epoch }),
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

export function hippocampusClient(p: Platform): HippocampusClient {
  if (p.local.has(HIPPOCAMPUS_LOCAL)) return localHippocampus(p);
  return httpHippocampus(p.config.urls.hippocampus, { internalToken: p.config.internalToken });
}
