// The Cortex service: the chain (an anvil child on :8545 in embedded mode, or CORTEX_RPC_URL),
// the suite deployed once per chain, and the outbox submitter. Registered in p.local as 'cortex'.
import { createECDH } from 'node:crypto';
import { Wallet, computeAddress } from 'ethers';
import type { Platform } from '../../../lib/platform.ts';
import { openDatabase, type Database } from '../../../lib/db/index.ts';
import { started, type ServiceStarter } from '../../../lib/service.ts';
import { cortexAnvilOptions, rpc, startAnvil, takeEarlyAnvil, waitForRpc, type Anvil, type AnvilOptions } from './anvil.ts';
import { deploymentsFile, ensureSuite, operatorKey, providerFor, type Deployment } from './deploy.ts';
import { rewindToChain, startSubmitter, type CortexChain, type Submitter, type SubmitterOptions } from './submitter.ts';
import { driftChecker } from './reconcile.ts';
import { artifactsHash } from './artifacts.ts';
import { reportProgress } from '../../../lib/progress.ts';

export { deploySuite } from './deploy.ts';
export { outboxStatus } from './submitter.ts';
export { reconcile, cortexTxSource } from './reconcile.ts';

export interface CortexService {
  rpcUrl: string;
  chain: CortexChain;
  suite: Deployment;
  submitter: Submitter;
  /** Outbox rows sent again at start because the chain no longer had them (fresh chain or lost blocks). */
  rewound: number;
}

/** The address of a secp256k1 private key (hex), as ethers' Wallet gives it, without noble's precomputed tables. */
export function addressOf(key: string): string {
  const ecdh = createECDH('secp256k1');
  ecdh.setPrivateKey(Buffer.from(key.replace(/^0x/, ''), 'hex'));
  return computeAddress(`0x${ecdh.getPublicKey('hex')}`);
}

export async function startCortexWith(
  p: Platform,
  opts: { submitter?: SubmitterOptions; reconcileMs?: number; anvil?: Partial<AnvilOptions> } = {},
): Promise<CortexService & { close(): Promise<void>; anvil?: Anvil }> {
  let anvil: Anvil | undefined;
  let rpcUrl = p.config.cortexRpcUrl;
  const anvilOptions: AnvilOptions = { ...cortexAnvilOptions(p.config), ...opts.anvil };
  if (!rpcUrl) {
    reportProgress('cortex', 'starting anvil');
    // The one the launcher started ahead (prestartCortex), when it has these options.
    const early = takeEarlyAnvil(anvilOptions);
    anvil = early ? await early.catch(() => startAnvil(anvilOptions)) : await startAnvil(anvilOptions);
    anvilOptions.port = anvil.port; // a restart comes back on the same port
    rpcUrl = anvil.url;
  } else await waitForRpc(rpcUrl);
  const provider = providerFor(rpcUrl);
  let own: Database | undefined;
  try {
    const chainId = Number((await provider.getNetwork()).chainId);
    const key = await operatorKey(provider, p.config.cortex.operatorKey);
    reportProgress('cortex', 'checking the contract suite');
    const { deployment: suite, fresh } = await ensureSuite(provider, key, deploymentsFile(p.config.dataDir, chainId), {
      mine: !!anvil,
      redeployStale: !!anvil,
    });
    if (suite.inputHash !== artifactsHash())
      p.log.warn(
        { deployed: suite.inputHash, built: artifactsHash() },
        'cortex: the deployed suite was built from other contract sources than contracts/build',
      );
    const rewound = await rewindToChain(p.db.prisma, provider, fresh, p.log);
    // The wallet's secp256k1 tables (noble's, about 75 ms) are built at its first signature, not
    // in the start: the address comes from OpenSSL (issue 13).
    let wallet: Wallet | undefined;
    const chain: CortexChain = {
      provider,
      get wallet() {
        return (wallet ??= new Wallet(key, provider));
      },
      address: addressOf(key),
      suite,
      chainId,
    };
    // On PostgreSQL the submitter has connections of its own: in one process with the request
    // traffic (cog start), each of its queries waited in the pool's queue behind the perceives (10
    // connections, 32 clients) and a round took tens of seconds. PGlite has one connection anyway.
    own =
      p.db.kind === 'postgres' && p.config.databaseUrl
        ? await openDatabase({ databaseUrl: p.config.databaseUrl, dataDir: p.config.dataDir, poolSize: 2, migrated: true })
        : undefined;
    // Ledger rows are settled once their epoch has ended (one settlement per epoch under load).
    const submitter = startSubmitter(own ?? p.db, chain, p.log, {
      currentEpoch: () => p.epochs.current(),
      settleAfterMs: Math.round(1.5 * p.config.epochIntervalMs),
      // An idle poll at most a quarter epoch (1 s at the default 4 s epochs): a row written while
      // the submitter idles waits at most that for its round (the outbox's target is in epochs).
      idlePollMaxMs: Math.min(1000, Math.round(p.config.epochIntervalMs / 4)),
      firstRound: started(p),
      ...opts.submitter,
    });
    // An epoch's end is when its ledger rows are settled and the moved heads queued: a round at once,
    // not at the next poll (up to a poll later, behind a round that may be busy confirming).
    const offEpoch = p.epochs.onAdvance(() => submitter.kick());
    p.log.info({ rpcUrl, chainId, operator: chain.address, fresh }, 'cortex: suite ready, submitter running');
    // Periodic drift check: warns, never repairs. One checker for the process's life: each check
    // folds what landed since the last one (2 blocks behind the newest recorded: their receipts may
    // still be being written). A restarted node (lost blocks, or a new suite) starts a new one.
    let checker = driftChecker(p.db.prisma, chain);
    let checking = false;
    const timer = setInterval(() => {
      if (checking) return;
      checking = true;
      checker
        .check({ lagBlocks: 2 })
        .then((d) => d.length && p.log.warn({ drift: d.slice(0, 20), count: d.length }, 'cortex: database and chain disagree'))
        .catch((e) => p.log.warn({ err: (e as Error).message }, 'cortex: reconcile failed'))
        .finally(() => {
          checking = false;
        });
    }, opts.reconcileMs ?? 60_000);
    timer.unref();
    const service: CortexService = { rpcUrl, chain, suite, submitter, rewound };
    p.local.set('cortex', service);
    // Our own anvil is supervised: when it stops answering (refused for 2 s: killed or crashed; no
    // answer for 10 s: hung) it is ended and started again on the same port from its state file,
    // the suite is checked (redeployed on a fresh chain) and outbox rows whose blocks were lost are
    // sent again.
    let closed = false;
    let downSince = 0;
    let busy = false;
    let restarting: Promise<void> | undefined;
    const restartAnvil = async () => {
      const old = anvil!;
      p.log.warn({ port: anvilOptions.port }, 'cortex: anvil stopped answering, restarting it');
      // No round until the outbox matches the new node: one sent to it before rewindToChain would
      // settle ledger rows against balances that lost their blocks' burns.
      const quiet = submitter.pause();
      try {
        process.kill(-old.child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
      try {
        await quiet; // the round in flight ends once its node is gone
        await replaceAnvil();
      } finally {
        submitter.resume();
      }
    };
    const replaceAnvil = async () => {
      for (let attempt = 1; !closed; attempt++) {
        try {
          anvil = await startAnvil(anvilOptions);
          break;
        } catch (e) {
          p.log.warn({ attempt, err: (e as Error).message }, 'cortex: anvil restart failed, retrying');
          await new Promise((r) => setTimeout(r, Math.min(5000, 500 * attempt)));
        }
      }
      if (closed) {
        await anvil?.close(); // closed while restarting: no child outlives the service
        return;
      }
      const { deployment, fresh: again } = await ensureSuite(provider, key, deploymentsFile(p.config.dataDir, chainId), { mine: true });
      chain.suite = deployment;
      service.suite = deployment;
      const resent = await rewindToChain(p.db.prisma, provider, again, p.log);
      checker = driftChecker(p.db.prisma, chain);
      p.log.warn({ pid: anvil!.child.pid, fresh: again, resent }, 'cortex: anvil restarted');
    };
    const watch = anvil
      ? setInterval(() => {
          if (busy || closed) return;
          busy = true;
          const dead = anvil!.child.exitCode !== null || anvil!.child.signalCode !== null;
          void (async () => {
            try {
              if (!dead) {
                try {
                  await rpc(service.rpcUrl, 'eth_chainId', [], 2000);
                  downSince = 0;
                  return;
                } catch (e) {
                  // Refused: the node is gone, restart soon. No answer: it may only be busy, so
                  // give it 10 s (a restart loses the blocks since its last state write).
                  const refused = (e as { cause?: { code?: unknown } }).cause?.code === 'ECONNREFUSED';
                  downSince ||= Date.now();
                  if (Date.now() - downSince < (refused ? 2000 : 10_000)) return;
                }
              }
              restarting = restartAnvil();
              await restarting;
              downSince = 0;
            } catch (e) {
              p.log.warn({ err: (e as Error).message }, 'cortex: anvil supervision failed, will retry');
            } finally {
              busy = false;
            }
          })();
        }, 1000)
      : undefined;
    watch?.unref();
    return {
      ...service,
      anvil,
      async close() {
        closed = true;
        clearInterval(watch);
        await restarting?.catch(() => {});
        clearInterval(timer);
        offEpoch();
        await submitter.close();
        await own?.close();
        p.local.delete('cortex');
        provider.destroy();
        await anvil?.close();
      },
    };
  } catch (e) {
    provider.destroy();
    await own?.close();
    await anvil?.close();
    throw e;
  }
}

export const startCortex: ServiceStarter = async (p) => {
  const s = await startCortexWith(p);
  return { name: 'cortex', url: s.rpcUrl, close: s.close };
};
