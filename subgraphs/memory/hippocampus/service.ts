// Hippocampus (:5001): the content-addressed, epoch-gated DAG store. CIDs are defined in cid.ts.
//   PUT  /dag              {cid, data, links, epoch, stackId}  -> 201 {cid, created: true} (200 when known)
//   GET  /dag/:cid?epoch=  the Memory node; 404 unknown, 410 GATED, 400 future/invalid epoch
//   GET  /dag/:cid/meta   index metadata {cid, stackId, epoch, links, pinned, stored} (never gated)
//   POST /dag/:cid/pin     pins (the memory-token charge is the memory domain's, see memory.ts)
//   POST /recall           {root, depth, epoch} -> {nodes, gated, missing, levels}
//   GET  /epochs/:epoch/writes  {epoch, cids}: the CIDs written in the epoch, in write order (the
//                          Thalamus's ipfsRoot leaves: a Hippocampus that does not answer is a gap)
//   GET  /health, GET /stats
//   GET|PUT /replica/dag/<sha256>  this node's own payload store, for its peers (peers.ts)
// The index is the shared database, and the platform's own writes keep each payload in its index
// row (store.ts). Payloads PUT through this API go to the object store: with HIPPOCAMPUS_NODE_ID
// (distributed mode) and no S3 endpoint, the node's own store under
// $COG_DATA_DIR/hippocampus/<node id>/; those pinned replicate to HIPPOCAMPUS_PEERS, and one missing
// here is fetched from a peer (see peers.ts).
// The CID may arrive percent-encoded (cog%3A%2F%2F...) or raw (cog://...): the wildcard routes
// take both.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { badRequest, notFound } from '../../../lib/errors.ts';
import path from 'node:path';
import { createObjectStore } from '../../../lib/objects/index.ts';
import type { ObjectStore } from '../../../lib/objects/port.ts';
import { parseCid, payloadKey } from './cid.ts';
import { peeredObjects, pushToPeers, replicaRoutes, shardLost, startPinSync, type PeerOptions } from './peers.ts';
import {
  MAX_LINKS,
  MAX_WALK_DEPTH,
  WRITE_KINDS,
  checkReaderEpoch,
  dagStats,
  dagWritesInEpoch,
  nodeMeta,
  pinStored,
  putNode,
  readNode,
  walkDag,
  type PutNodeInput,
} from './store.ts';

const putSchema = Type.Object({
  cid: Type.String({ maxLength: 200 }),
  data: Type.String({ maxLength: 400_000 }),
  links: Type.Array(Type.String({ maxLength: 200 }), { maxItems: MAX_LINKS }),
  epoch: Type.Integer({ minimum: 0 }),
  stackId: Type.String({ minLength: 1, maxLength: 200 }),
  kind: Type.Optional(Type.Unsafe<(typeof WRITE_KINDS)[number]>({ type: 'string', enum: [...WRITE_KINDS] })),
  pinned: Type.Optional(Type.Boolean()),
  sleeveId: Type.Optional(Type.Unsafe<string | null>({ type: ['string', 'null'], maxLength: 200 })),
});

const recallSchema = Type.Object({
  root: Type.String({ minLength: 1, maxLength: 200 }),
  depth: Type.Integer({ minimum: 1, maximum: MAX_WALK_DEPTH }),
  epoch: Type.Integer({ minimum: 0 }),
});

function cidFromWildcard(raw: string): string {
  try {
    return raw.includes('%') ? decodeURIComponent(raw) : raw;
  } catch {
    throw badRequest('cid is not valid percent-encoding');
  }
}

/**
 * This node's epoch for a request that names `claimed`. A caller ahead of this node's view has seen a
 * block whose bus event has not reached here yet (a gateway that just mined one): ask Medulla before
 * calling the caller's epoch "in the future".
 */
async function epochFor(p: Platform, claimed: unknown): Promise<number> {
  if (typeof claimed === 'number' && Number.isSafeInteger(claimed) && claimed > p.epochs.current()) return (await p.epochs.refresh()).epoch;
  return p.epochs.current();
}

async function readerEpoch(p: Platform, q: unknown): Promise<number> {
  const raw = (q as { epoch?: string } | undefined)?.epoch;
  if (raw === undefined || raw === '') return p.epochs.current();
  if (!/^\d{1,15}$/.test(raw)) throw badRequest('epoch must be a non-negative integer');
  const epoch = Number(raw);
  return checkReaderEpoch(epoch, await epochFor(p, epoch));
}

export interface HippocampusRouteOptions {
  platform: Platform;
  /** This node's id (HIPPOCAMPUS_NODE_ID), shown by /health and /stats. */
  node?: string;
  /** Called after a node is pinned here (replication to peers). */
  onPinned?: (cid: string) => void;
}

export async function hippocampusRoutes(fastify: FastifyInstance, opts: HippocampusRouteOptions): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const node = opts.node ? { node: opts.node } : {};
  app.get('/health', async () => ({ ok: true, name: 'hippocampus', ...node, nodes: await p.db.prisma.memoryNode.count(), ts: Date.now() }));
  app.get('/stats', async () => ({ ...(await dagStats(p)), ...node }));

  app.put('/dag', { schema: { body: putSchema } }, async (req, reply) => {
    const body: PutNodeInput = req.body;
    // A node one epoch ahead is accepted as it is (validatePut); further ahead, ask Medulla first.
    const current = await epochFor(p, typeof body.epoch === 'number' ? body.epoch - 1 : undefined);
    const { created } = await putNode(p.db.prisma, p.objects, body, current);
    if (body.pinned) opts.onPinned?.(body.cid);
    return reply.code(created ? 201 : 200).send({ cid: body.cid, created });
  });

  app.get<{ Params: { '*': string } }>('/dag/*', async (req) => {
    const rest = req.params['*'];
    if (rest.endsWith('/meta')) {
      const cid = cidFromWildcard(rest.slice(0, -5));
      const meta = await nodeMeta(p.db.prisma, p.objects, cid);
      if (!meta) throw notFound('Memory node', cid);
      return meta;
    }
    const cid = cidFromWildcard(rest);
    return readNode(p.db.prisma, p.objects, cid, await readerEpoch(p, req.query));
  });

  app.post<{ Params: { '*': string } }>('/dag/*', async (req) => {
    const rest = req.params['*'];
    if (!rest.endsWith('/pin')) throw badRequest('POST /dag/:cid/pin is the only POST under /dag');
    const { cid, pinned } = await pinStored(p.db.prisma, cidFromWildcard(rest.slice(0, -4)));
    opts.onPinned?.(cid);
    return { cid, pinned };
  });

  app.get<{ Params: { epoch: string } }>('/epochs/:epoch/writes', async (req) => {
    const raw = req.params.epoch;
    if (!/^\d{1,15}$/.test(raw)) throw badRequest('epoch must be a non-negative integer');
    const epoch = Number(raw);
    // Any epoch, also one ahead of this node's view: the folding Thalamus may have seen it first.
    return { epoch, cids: await dagWritesInEpoch(p.db.prisma, epoch) };
  });

  app.post('/recall', { schema: { body: recallSchema } }, async (req) => {
    const b = req.body;
    const epoch = checkReaderEpoch(b.epoch, await epochFor(p, b.epoch));
    return walkDag(p.db, p.objects, b.root, b.depth, epoch);
  });
}

/** The node's own payload store: its directory in distributed mode (no S3), the platform's otherwise. */
async function nodeStore(p: Platform, node: string | undefined): Promise<{ store: ObjectStore; own: boolean }> {
  if (!node || p.config.s3.endpoint) return { store: p.objects, own: false };
  return { store: await createObjectStore({ dir: path.join(p.config.dataDir, 'hippocampus', node) }), own: true };
}

export const startHippocampus: ServiceStarter = async (p) => {
  const nodeId = p.config.hippocampusNodeId;
  const { store: local, own } = await nodeStore(p, nodeId);
  const peerOpts: PeerOptions = {
    peers: p.config.hippocampusPeers,
    db: p.db.prisma,
    internalToken: p.config.internalToken,
    onLost: (key) => shardLost(p, key).catch((e) => p.log.warn({ key, err: (e as Error).message }, 'hippocampus: could not open shard-loss residue')),
  };
  // The node's platform view: its own store, reading through to its peers.
  const hp: Platform = { ...p, objects: peerOpts.peers.length ? peeredObjects(local, peerOpts) : local };
  const replicate = (cid: string) => {
    const parsed = parseCid(cid);
    if (!parsed || !peerOpts.peers.length) return;
    const key = payloadKey(parsed.hash);
    void local
      .get(key)
      .then((body) => body && pushToPeers(peerOpts, key, body))
      .catch(() => {});
  };
  const sync = startPinSync(hp, local, peerOpts, Math.max(2000, p.config.epochIntervalMs));
  const app = createHttp({ name: 'hippocampus', log: p.log, internalToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'hippocampus' });
  await app.register(hippocampusRoutes, { platform: hp, node: nodeId, onPinned: replicate });
  await app.register(replicaRoutes, { local, platform: hp });
  const port = await listen(app, 'hippocampus', p.config.host, p.config.ports.hippocampus);
  const url = `http://127.0.0.1:${port}`;
  void sync.runOnce().catch(() => {});
  return {
    name: 'hippocampus',
    url,
    async close() {
      sync.stop();
      await app.close();
      if (own) await local.close();
    },
  };
};
