// Hippocampus (:5001): the content-addressed, epoch-gated DAG store. CIDs are defined in cid.ts.
//   PUT  /dag              {cid, data, links, epoch, stackId}  -> 201 {cid, created: true} (200 when known)
//   GET  /dag/:cid?epoch=  the Memory node; 404 unknown, 410 GATED, 400 future/invalid epoch
//   GET  /dag/:cid/meta   index metadata {cid, stackId, epoch, links, pinned, stored} (never gated)
//   POST /dag/:cid/pin     pins (the memory-token charge is the memory domain's, see memory.ts)
//   POST /recall           {root, depth, epoch} -> {nodes, gated, missing, levels}
//   GET  /health, GET /stats
// The CID may arrive percent-encoded (cog%3A%2F%2F...) or raw (cog://...): the wildcard routes
// take both.
import type { FastifyInstance } from 'fastify';
import { createHttp, listen } from '../../../lib/http.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { badRequest, notFound } from '../../../lib/errors.ts';
import { HIPPOCAMPUS_LOCAL } from './client.ts';
import { MAX_LINKS, MAX_WALK_DEPTH, WRITE_KINDS, checkReaderEpoch, dagStats, nodeMeta, pinStored, putNode, readNode, walkDag, type PutNodeInput } from './store.ts';

const putSchema = {
  type: 'object',
  required: ['cid', 'data', 'links', 'epoch', 'stackId'],
  properties: {
    cid: { type: 'string', maxLength: 200 },
    data: { type: 'string', maxLength: 400_000 },
    links: { type: 'array', maxItems: MAX_LINKS, items: { type: 'string', maxLength: 200 } },
    epoch: { type: 'integer', minimum: 0 },
    stackId: { type: 'string', minLength: 1, maxLength: 200 },
    kind: { type: 'string', enum: [...WRITE_KINDS] },
    pinned: { type: 'boolean' },
    sleeveId: { type: ['string', 'null'], maxLength: 200 },
  },
};

const recallSchema = {
  type: 'object',
  required: ['root', 'depth', 'epoch'],
  properties: {
    root: { type: 'string', minLength: 1, maxLength: 200 },
    depth: { type: 'integer', minimum: 1, maximum: MAX_WALK_DEPTH },
    epoch: { type: 'integer', minimum: 0 },
  },
};

function cidFromWildcard(raw: string): string {
  try {
    return raw.includes('%') ? decodeURIComponent(raw) : raw;
  } catch {
    throw badRequest('cid is not valid percent-encoding');
  }
}

function readerEpoch(q: unknown, current: number): number {
  const raw = (q as { epoch?: string } | undefined)?.epoch;
  if (raw === undefined || raw === '') return current;
  if (!/^\d{1,15}$/.test(raw)) throw badRequest('epoch must be a non-negative integer');
  return checkReaderEpoch(Number(raw), current);
}

export async function hippocampusRoutes(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get('/health', async () => ({ ok: true, name: 'hippocampus', nodes: await p.db.prisma.memoryNode.count(), ts: Date.now() }));
  app.get('/stats', async () => dagStats(p));

  app.put('/dag', { schema: { body: putSchema } }, async (req, reply) => {
    const { created } = await putNode(p.db.prisma, p.objects, req.body as PutNodeInput, p.epochs.current());
    return reply.code(created ? 201 : 200).send({ cid: (req.body as PutNodeInput).cid, created });
  });

  app.get('/dag/*', async (req) => {
    const rest = (req.params as { '*': string })['*'];
    if (rest.endsWith('/meta')) {
      const cid = cidFromWildcard(rest.slice(0, -5));
      const meta = await nodeMeta(p.db.prisma, p.objects, cid);
      if (!meta) throw notFound('Memory node', cid);
      return meta;
    }
    const cid = cidFromWildcard(rest);
    return readNode(p.db.prisma, p.objects, cid, readerEpoch(req.query, p.epochs.current()));
  });

  app.post('/dag/*', async (req) => {
    const rest = (req.params as { '*': string })['*'];
    if (!rest.endsWith('/pin')) throw badRequest('POST /dag/:cid/pin is the only POST under /dag');
    const { cid, pinned } = await pinStored(p.db.prisma, cidFromWildcard(rest.slice(0, -4)));
    return { cid, pinned };
  });

  app.post('/recall', { schema: { body: recallSchema } }, async (req) => {
    const b = req.body as { root: string; depth: number; epoch: number };
    const epoch = checkReaderEpoch(b.epoch, p.epochs.current());
    return walkDag(p.db.prisma, p.objects, b.root, b.depth, epoch);
  });
}

export const startHippocampus: ServiceStarter = async (p) => {
  const app = createHttp({ name: 'hippocampus', log: p.log, internalToken: p.config.internalToken });
  await app.register(hippocampusRoutes, { platform: p });
  const port = await listen(app, 'hippocampus', p.config.host, p.config.ports.hippocampus);
  const url = `http://127.0.0.1:${port}`;
  p.local.set(HIPPOCAMPUS_LOCAL, { url });
  return {
    name: 'hippocampus',
    url,
    async close() {
      p.local.delete(HIPPOCAMPUS_LOCAL);
      await app.close();
    },
  };
};
