// Gateway request guards: per-client rate limits, and (with COG_AUTH=required) ed25519-signed
// stack-scoped writes.
//
// Signature scheme. A client signs with its stack's key (the identityPriv seed):
//   message   = METHOD "\n" PATH(with query) "\n" sha256hex(raw body or "") "\n" TIMESTAMP
//   headers   x-cog-stack: <stackId>   x-cog-timestamp: <Unix ms>   x-cog-signature: <128 hex>
// The timestamp must be within COG_AUTH_SKEW_MS (default 30 s) of the server's clock, and a
// signature is accepted once (replays inside the window are refused: the cache remembers it).
// Every failure is a 401 that changes nothing. Stack creation (POST /v1/stacks) needs no
// signature: there is no key yet.
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { sendProblem } from '../lib/http.ts';
import { tooManyRequests, unauthorized } from '../lib/errors.ts';
import { verify } from '../lib/crypto.ts';

export const AUTH_SKEW_MS = Number(process.env.COG_AUTH_SKEW_MS ?? 30_000);

export function signingMessage(method: string, path: string, body: string, timestamp: string): string {
  return `${method.toUpperCase()}\n${path}\n${createHash('sha256').update(body).digest('hex')}\n${timestamp}`;
}

/** The stack a write acts for, read from the route's params and body (sleeves resolve to their stack). */
async function targetStacks(p: Platform, req: FastifyRequest): Promise<string[]> {
  const params = (req.params ?? {}) as Record<string, string>;
  const body = (req.body && typeof req.body === 'object' ? req.body : {}) as Record<string, unknown>;
  const stacks = new Set<string>();
  const sleeves = new Set<string>();
  const url = req.routeOptions.url ?? '';
  for (const [k, v] of Object.entries(params)) {
    if (k === 'stackId' || (k === 'id' && url.startsWith('/v1/stacks'))) stacks.add(v);
    if (k === 'id' && url.startsWith('/v1/sleeves')) sleeves.add(v);
  }
  for (const k of ['stackId']) if (typeof body[k] === 'string') stacks.add(body[k] as string);
  for (const k of ['sleeveId', 'fromSleeveId', 'from']) if (typeof body[k] === 'string') sleeves.add(body[k] as string);
  if (sleeves.size) {
    const rows = await p.db.prisma.sleeve.findMany({ where: { id: { in: [...sleeves] } }, select: { stackId: true } });
    for (const r of rows) stacks.add(r.stackId);
  }
  return [...stacks];
}

export function installGuards(app: FastifyInstance, p: Platform): void {
  const perMinute = Number(process.env.COG_RATE_LIMIT_PER_MIN ?? 120_000); // 0 turns it off
  // Rate limit per client address, in fixed one-minute windows held in the cache (Redis when
  // distributed, so every gateway process counts together).
  app.addHook('onRequest', async (req, reply) => {
    if (!(perMinute > 0) || req.url === '/healthz') return;
    const window = Math.floor(Date.now() / 60_000);
    const n = await p.cache.incr(`rl:${req.ip}:${window}`, 61_000).catch(() => 0);
    if (n > perMinute) {
      const retry = 60 - (Math.floor(Date.now() / 1000) % 60);
      return sendProblem(reply, tooManyRequests(`More than ${perMinute} requests a minute from this client`, retry));
    }
  });

  if (p.config.auth !== 'required') return;
  // Keep the raw body so the signature covers exactly what was sent.
  app.addHook('preParsing', async (req, _reply, payload) => {
    const chunks: Buffer[] = [];
    for await (const c of payload) chunks.push(Buffer.from(c));
    const raw = Buffer.concat(chunks);
    (req as FastifyRequest & { rawBody?: string }).rawBody = raw.toString('utf8');
    const { Readable } = await import('node:stream');
    return Readable.from([raw]);
  });
  app.addHook('preHandler', async (req, reply) => {
    const write = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'OPTIONS';
    if (!write || !req.url.startsWith('/v1/') || (req.method === 'POST' && req.routeOptions.url === '/v1/stacks')) return;
    const stackId = req.headers['x-cog-stack'];
    const ts = req.headers['x-cog-timestamp'];
    const sig = req.headers['x-cog-signature'];
    const refuse = (why: string) => sendProblem(reply, unauthorized(why));
    if (typeof stackId !== 'string' || typeof ts !== 'string' || typeof sig !== 'string') {
      return refuse('Signed request required: x-cog-stack, x-cog-timestamp and x-cog-signature headers');
    }
    if (!/^\d{1,16}$/.test(ts) || Math.abs(Date.now() - Number(ts)) > AUTH_SKEW_MS) return refuse('Timestamp outside the allowed clock skew');
    const stack = await p.db.prisma.stack.findUnique({ where: { id: stackId }, select: { pubKey: true } });
    const raw = (req as FastifyRequest & { rawBody?: string }).rawBody ?? '';
    if (!stack || !verify(sig, new TextEncoder().encode(signingMessage(req.method, req.url, raw, ts)), stack.pubKey)) return refuse('Bad signature');
    const targets = await targetStacks(p, req);
    if (targets.some((t) => t !== stackId)) return refuse('The signing stack may act only for itself and its own sleeves');
    if (!(await p.cache.setIfAbsent(`sig:${sig}`, '1', AUTH_SKEW_MS * 2 + 1000))) return refuse('Replayed signature');
  });
}
