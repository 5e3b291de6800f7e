// Medulla (:8332): the proof-of-work chain's node. POST /rpc (JSON-RPC 2.0 and plain form),
// GET /health. Its settings (MEDULLA_NODE_ID, MEDULLA_AUTOMINE, MEDULLA_DUTY, MEDULLA_PACING,
// MEDULLA_GENESIS_DIFFICULTY) are read by lib/config.ts (config.medulla).
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { Platform } from '../../../lib/platform.ts';
import type { RunningService, ServiceStarter } from '../../../lib/service.ts';
import { MedullaNode, type MedullaNodeOptions } from './node.ts';
import { medullaMethods } from './methods.ts';
import { registerRpc } from './rpc.ts';

/**
 * The genesis difficulty per second of epoch interval: a block's expected double-SHA-256 hashes
 * (retarget corrects the rest). Paced blocks keep it (their solve times are the interval), so it is
 * what the background miner spends: at 50,000, about 13% of a core of this 2-core machine whether or
 * not anything happens; at 10,000, 5–6% (the rest is the slices' own cost), and a block still
 * takes a tenth of its interval at the 0.25 duty, so a loaded machine rarely makes one late.
 */
export const ASSUMED_HASHRATE = 10_000;

export interface MedullaService extends RunningService {
  url: string;
  node: MedullaNode;
}

function configOptions(p: Platform, port: number): MedullaNodeOptions {
  const m = p.config.medulla;
  return {
    node: m.nodeId ?? `medulla-${port}`,
    peers: p.config.medullaPeers,
    autoMine: m.autoMine,
    duty: m.duty,
    genesisDifficulty:
      m.genesisDifficulty !== undefined ? Math.max(1, m.genesisDifficulty) : Math.max(1, Math.round((ASSUMED_HASHRATE * p.config.epochIntervalMs) / 1000)),
    intervalMs: p.config.epochIntervalMs,
    pollMs: Math.max(250, p.config.epochIntervalMs),
    paced: m.paced,
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
    return {
      ok: !!node,
      name: 'medulla',
      node: node?.opts.node,
      height: info?.height,
      epoch: info?.epoch,
      tip: info?.tip,
      peers: node?.peers.length ?? 0,
      mining: node?.autoMine ?? false,
      ts: Date.now(),
    };
  });
  registerRpc(
    app,
    medullaMethods(() => node!),
  );
  const bound = await listen(app, 'medulla', p.config.host, port);
  try {
    const base = configOptions(p, port || bound);
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
