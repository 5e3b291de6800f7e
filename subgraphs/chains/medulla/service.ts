// Medulla (:8332): the proof-of-work chain's node. POST /rpc (JSON-RPC 2.0 and plain form),
// GET /health. Settings beyond lib/config: MEDULLA_NODE_ID, MEDULLA_AUTOMINE (on|off),
// MEDULLA_DUTY (CPU share of background mining, 0.01..1, default 0.25), MEDULLA_PACING (on|off,
// default on: background blocks come one interval after their parent), MEDULLA_GENESIS_DIFFICULTY.
import { ConfigError } from '../../../lib/config.ts';
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { RunningService, ServiceStarter } from '../../../lib/service.ts';
import { MedullaNode, type MedullaNodeOptions } from './node.ts';
import { medullaMethods } from './methods.ts';
import { registerRpc } from './rpc.ts';

/** Background hashes per second assumed for the genesis difficulty (retarget corrects the rest). */
export const ASSUMED_HASHRATE = 50_000;

export interface MedullaService extends RunningService {
  url: string;
  node: MedullaNode;
}

function envOptions(p: Platform, port: number, env = process.env): MedullaNodeOptions {
  const duty = env.MEDULLA_DUTY ? Number(env.MEDULLA_DUTY) : 0.25;
  if (!Number.isFinite(duty) || duty < 0.01 || duty > 1) throw new ConfigError('MEDULLA_DUTY', `must be a number in [0.01, 1], got "${env.MEDULLA_DUTY}"`);
  const auto = env.MEDULLA_AUTOMINE ?? 'on';
  if (auto !== 'on' && auto !== 'off') throw new ConfigError('MEDULLA_AUTOMINE', `must be on or off, got "${auto}"`);
  const pacing = env.MEDULLA_PACING ?? 'on';
  if (pacing !== 'on' && pacing !== 'off') throw new ConfigError('MEDULLA_PACING', `must be on or off, got "${pacing}"`);
  const g = env.MEDULLA_GENESIS_DIFFICULTY;
  if (g !== undefined && !/^\d+$/.test(g)) throw new ConfigError('MEDULLA_GENESIS_DIFFICULTY', `must be a positive integer, got "${g}"`);
  return {
    node: env.MEDULLA_NODE_ID || `medulla-${port}`,
    peers: p.config.medullaPeers,
    autoMine: auto === 'on',
    duty,
    genesisDifficulty: g ? Math.max(1, Number(g)) : Math.max(1, Math.round((ASSUMED_HASHRATE * p.config.epochIntervalMs) / 1000)),
    intervalMs: p.config.epochIntervalMs,
    pollMs: Math.max(250, p.config.epochIntervalMs),
    paced: pacing === 'on',
  };
}

/** Starts one node; `overrides` (tests) replace what the environment says. */
export async function createMedulla(p: Platform, overrides: Partial<MedullaNodeOptions> & { port?: number } = {}): Promise<MedullaService> {
  const port = overrides.port ?? p.config.ports.medulla;
  const app = createHttp({ name: 'medulla', log: p.log, internalToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'medulla' });
  // The node id defaults to the configured port; with port 0 it is fixed once the socket is bound.
  let node: MedullaNode | undefined;
  app.addHook('onRequest', async (req, reply) => {
    if (!node && req.url.startsWith('/rpc')) return reply.code(503).send({ jsonrpc: '2.0', id: null, error: { code: -32050, message: 'medulla is starting' } });
  });
  app.get('/health', async () => {
    const info = node?.chain.info();
    return { ok: !!node, name: 'medulla', node: node?.opts.node, height: info?.height, epoch: info?.epoch, tip: info?.tip, peers: node?.peers.length ?? 0, mining: node?.autoMine ?? false, ts: Date.now() };
  });
  registerRpc(app, medullaMethods(() => node!));
  const bound = await listen(app, 'medulla', p.config.host, port);
  try {
    const base = envOptions(p, port || bound);
    node = await MedullaNode.open(p, { ...base, ...overrides, node: overrides.node ?? base.node });
  } catch (e) {
    await app.close();
    throw e;
  }
  const host = p.config.host === '0.0.0.0' ? '127.0.0.1' : p.config.host;
  const url = `http://${host}:${bound}`;
  await node.start(url);
  p.local.set('medulla', node);
  const n = node;
  return {
    name: 'medulla',
    url,
    node: n,
    async close() {
      await app.close();
      await n.close();
    },
  };
}

export const startMedulla: ServiceStarter = (p) => createMedulla(p);
