// Hippocampus peering (HIPPOCAMPUS_PEERS). Every node of a cluster shares the index (MemoryNode
// rows in the one database); the platform's own writes keep their payloads in those rows, so only
// payloads PUT through the Hippocampus API (and those stored before payloads moved into the rows)
// live in a node's own store and are peered. A node
//   * replicates pinned nodes to its peers: pushes the payload on pin (PUT /replica/<key>) and, as
//     a fallback, pulls every pinned payload it lacks from a peer on a timer (anti-entropy);
//   * fetches a payload it lacks from a peer on read (GET /replica/<key>, the peer's own store
//     only, so requests never bounce around the cluster) and keeps it (read repair);
//   * opens a shard-loss residue when a known CID (an index row exists) can be served by no node.
// A payload from a peer is trusted only when it hashes to its CID (checked against the index row
// that names it): a corrupt or lying peer is skipped like a missing one.
// The store code (store.ts) sees one ObjectStore: `peeredObjects` wraps the node's local store.
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../../lib/db/index.ts';
import type { ObjectStore } from '../../../lib/objects/port.ts';
import type { Platform } from '../../../lib/platform.ts';
import { assertObjectKey } from '../../../lib/objects/index.ts';
import { Problem, badRequest, notFound } from '../../../lib/errors.ts';
import { internalAuthHeaders } from '../../../lib/internal-client.ts';
import { singleFlight } from '../../../lib/single-flight.ts';
import { openResidue } from '../../residues/index.ts';
import { computeCid, computeDataCid, parseCid, payloadKey } from './cid.ts';

export interface PeerOptions {
  peers: string[];
  /** The shared index, to check a peer's payload against the CID that names it. */
  db: Db;
  internalToken?: string;
  /** Per-peer request timeout. Default 2 s. */
  timeoutMs?: number;
  /** Called when a key is in no store of the cluster (after every peer was asked). */
  onLost?: (key: string) => void | Promise<void>;
}

const headers = internalAuthHeaders;
const replicaUrl = (peer: string, key: string) => `${peer}/replica/${key.split('/').map(encodeURIComponent).join('/')}`;

/**
 * True when `body` is the payload of a known node stored under `key` (dag/<hash>): some index row
 * `cog://<hash>@<epoch>` hashes to <hash> over this payload, in the node form (with its owner,
 * epoch and links) or the data form (cid.ts).
 */
export async function payloadMatches(db: Db, key: string, body: Uint8Array): Promise<boolean> {
  const hash = key.slice(4);
  const rows = await db.memoryNode.findMany({
    where: { cid: { startsWith: `cog://${hash}@` } },
    select: { cid: true, stackId: true, epoch: true, links: true },
    take: 10,
  });
  if (!rows.length) return false;
  let data: string;
  try {
    data = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return false;
  }
  return rows.some(
    (r) => computeCid({ data, links: r.links, epoch: r.epoch, stackId: r.stackId }) === r.cid || computeDataCid({ data, epoch: r.epoch }) === r.cid,
  );
}

/** The payload from the first peer that holds it in its own store and hashes to its CID, or null. */
export async function fetchFromPeers(o: PeerOptions, key: string): Promise<Uint8Array | null> {
  for (const peer of o.peers) {
    try {
      const res = await fetch(replicaUrl(peer, key), { headers: headers(o.internalToken), signal: AbortSignal.timeout(o.timeoutMs ?? 2000) });
      if (res.ok) {
        const body = new Uint8Array(await res.arrayBuffer());
        if (await payloadMatches(o.db, key, body)) return body;
        continue; // corrupt or foreign: ask the next peer
      }
      await res.body?.cancel();
    } catch {
      /* peer down or slow: ask the next one */
    }
  }
  return null;
}

/** Pushes a payload to every peer; resolves to the number that stored it. */
export async function pushToPeers(o: PeerOptions, key: string, body: Uint8Array): Promise<number> {
  const results = await Promise.all(
    o.peers.map(async (peer) => {
      try {
        // The cast: fetch's types, widened by a dev dependency's DOM lib, want an ArrayBuffer-backed view.
        const res = await fetch(replicaUrl(peer, key), {
          method: 'PUT',
          headers: { 'content-type': 'application/octet-stream', ...headers(o.internalToken) },
          body: body as Uint8Array<ArrayBuffer>,
          signal: AbortSignal.timeout(o.timeoutMs ?? 2000),
        });
        await res.body?.cancel();
        return res.ok;
      } catch {
        return false;
      }
    }),
  );
  return results.filter(Boolean).length;
}

/** The node's local store, reading through to peers for what it lacks (kept locally afterwards). */
export function peeredObjects(local: ObjectStore, o: PeerOptions): ObjectStore {
  const fromPeers = async (key: string): Promise<Uint8Array | null> => {
    if (!o.peers.length || !key.startsWith('dag/')) return null;
    const body = await fetchFromPeers(o, key);
    if (body) await local.put(key, body).catch(() => {});
    else await Promise.resolve(o.onLost?.(key)).catch(() => {});
    return body;
  };
  return {
    put: (key, body) => local.put(key, body),
    get: async (key) => (await local.get(key)) ?? fromPeers(key),
    has: async (key) => (await local.has(key)) || (await fromPeers(key)) !== null,
    delete: (key) => local.delete(key),
    list: (prefix) => local.list(prefix),
    close: () => local.close(),
  };
}

/** GET/PUT /replica/<key>: a peer's view of this node's own store (never forwarded). */
export async function replicaRoutes(app: FastifyInstance, opts: { local: ObjectStore; platform: Platform }): Promise<void> {
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: 1_048_576 }, (_req, body, done) => done(null, body));
  const keyOf = (raw: string) => {
    const key = raw
      .split('/')
      .map((s) => decodeURIComponent(s))
      .join('/');
    try {
      assertObjectKey(key);
    } catch {
      throw badRequest('invalid replica key');
    }
    if (!/^dag\/[0-9a-f]{64}$/.test(key)) throw badRequest('replica keys are dag/<sha256 hex>');
    return key;
  };
  app.get<{ Params: { '*': string } }>('/replica/*', async (req, reply) => {
    const key = keyOf(req.params['*']);
    const body = await opts.local.get(key);
    if (!body) throw notFound('Replica', key);
    return reply.type('application/octet-stream').send(Buffer.from(body));
  });
  app.put<{ Params: { '*': string } }>('/replica/*', async (req, reply) => {
    const key = keyOf(req.params['*']);
    const body = req.body;
    if (!Buffer.isBuffer(body) || body.length === 0) throw badRequest('replica body must be the payload bytes (application/octet-stream)');
    // Only payloads of known nodes (the shared index names them), and only the right bytes.
    const hash = key.slice(4);
    const known = await opts.platform.db.prisma.memoryNode.count({ where: { cid: { startsWith: `cog://${hash}@` } } });
    if (!known) throw notFound('Memory node', `cog://${hash}`);
    if (!(await payloadMatches(opts.platform.db.prisma, key, new Uint8Array(body))))
      throw new Problem(422, 'PAYLOAD_MISMATCH', 'Payload does not match its CID', `the payload does not hash to cog://${hash}@<epoch> of any known node`);
    await opts.local.put(key, new Uint8Array(body));
    return reply.code(201).send({ key, stored: true });
  });
}

/** Opens a shard-loss residue for every known node whose payload is the lost key. */
export async function shardLost(p: Platform, key: string): Promise<void> {
  const hash = key.slice(4);
  const rows = await p.db.prisma.memoryNode.findMany({ where: { cid: { startsWith: `cog://${hash}@` } }, select: { cid: true, stackId: true }, take: 10 });
  const epoch = p.epochs.current();
  for (const r of rows) {
    if (!parseCid(r.cid)) continue;
    await p.db.prisma.$transaction((tx) =>
      openResidue(tx, {
        kind: 'shard-loss',
        trigger: `known CID ${r.cid} is unreachable on every Hippocampus node`,
        stackId: r.stackId,
        epoch,
        evidence: { cid: r.cid },
        dedupeKey: `shard-loss:${r.stackId}:${r.cid}`,
        expiryEpochs: p.config.residueExpiryEpochs,
      }),
    );
  }
}

/**
 * Anti-entropy: every pinned payload this node lacks is pulled from a peer. Returns a stopper.
 * CIDs known to be held locally are remembered, so a pass costs one index query once caught up.
 */
export function startPinSync(p: Platform, local: ObjectStore, o: PeerOptions, everyMs: number): { stop(): void; runOnce(): Promise<number> } {
  const held = new Set<string>();
  let pulled = 0;
  // One pass at a time: a timer tick or a caller while one runs waits for it (and asks for one more).
  const pass = singleFlight(
    async () => {
      if (!o.peers.length) return;
      let cursor: bigint | undefined;
      for (;;) {
        // Payloads in their index rows are in the shared database: nothing to pull.
        const rows = await p.db.prisma.memoryNode.findMany({
          where: { pinned: true, payload: null, ...(cursor !== undefined ? { writeSeq: { gt: cursor } } : {}) },
          select: { cid: true, writeSeq: true },
          orderBy: { writeSeq: 'asc' },
          take: 500,
        });
        if (!rows.length) break;
        cursor = rows[rows.length - 1]!.writeSeq;
        for (const r of rows) {
          if (held.has(r.cid)) continue;
          const parsed = parseCid(r.cid);
          if (!parsed) continue;
          const key = payloadKey(parsed.hash);
          if (await local.has(key)) {
            held.add(r.cid);
            continue;
          }
          const body = await fetchFromPeers(o, key);
          if (body) {
            await local.put(key, body);
            held.add(r.cid);
            pulled++;
          }
        }
      }
    },
    { onError: (e) => p.log.warn({ err: (e as Error).message }, 'hippocampus: pin sync failed') },
  );
  /** Runs a pass (or waits for the one going on); resolves to the payloads pulled meanwhile. */
  const runOnce = async (): Promise<number> => {
    const before = pulled;
    await pass.run();
    return pulled - before;
  };
  const timer = setInterval(() => void pass.run(), everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer), runOnce };
}
