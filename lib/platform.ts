// The platform context handed to every service: config, logger and the ports with whichever
// adapters the environment selects. Business code never asks which mode it is in.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './config.ts';
import { createLogger, type Logger } from './log.ts';
import { openDatabase, type Database } from './db/index.ts';
import type { Bus } from './bus/port.ts';
import type { Cache } from './cache/port.ts';
import type { ObjectStore } from './objects/port.ts';
import { createBus } from './bus/index.ts';
import { createCache } from './cache/index.ts';
import { createObjectStore } from './objects/index.ts';
import { followEpochs, type EpochInfo, type EpochSource } from './epoch.ts';
import { fromHex, randomSecret, toHex } from './crypto.ts';
import { internalClient } from './internal-client.ts';
import { observePlatform } from './metrics.ts';

/**
 * The adapters a context takes from the composition root (bin/): each context declares its own
 * members by augmenting this interface (`declare module '.../lib/platform.ts'`), and assembly fills
 * them (a local Hippocampus in embedded mode, say); the kernel knows none of them.
 */
// biome-ignore lint/suspicious/noEmptyInterface: declaration merging: each context's door adds its ports
export interface Ports {}

export interface Platform {
  config: Config;
  log: Logger;
  db: Database;
  bus: Bus;
  cache: Cache;
  objects: ObjectStore;
  epochs: EpochSource;
  /** Key-encryption key that seals stack master secrets at rest. */
  masterKey: Uint8Array;
  /** Services started in this process, by name (embedded mode holds them all); written and read by the composition root only. */
  local: Map<string, unknown>;
  /** What assembly handed the contexts (see Ports). */
  ports: Partial<Ports>;
}

/** COG_MASTER_KEY (64 hex, validated by loadConfig) or a key file under the data dir, created once with mode 0600. */
export function loadMasterKey(config: Config): Uint8Array {
  if (config.masterKeyHex) return fromHex(config.masterKeyHex);
  const file = path.join(config.dataDir, 'master.key');
  if (fs.existsSync(file)) return fromHex(fs.readFileSync(file, 'utf8').trim());
  fs.mkdirSync(config.dataDir, { recursive: true });
  const key = randomSecret(32);
  fs.writeFileSync(file, toHex(key) + '\n', { mode: 0o600 });
  return key;
}

/** Medulla's getinfo over its RPC endpoint (the internal service client); seeds the epoch source. */
export async function medullaInfo(medullaUrl: string, internalToken?: string): Promise<EpochInfo> {
  const info = await internalClient({ name: 'Medulla', baseUrls: medullaUrl, token: internalToken, timeoutMs: 2000 }).rpc<{
    epoch: number;
    height: number;
    tip: string;
  }>('getinfo');
  if (!info) throw new Error('medulla getinfo failed');
  return { epoch: info.epoch, height: info.height, tip: info.tip };
}

export async function openPlatform(
  config: Config,
  opts: {
    log?: Logger;
    name?: string;
    /**
     * Medulla runs in this process, started after the stores: the epoch is not asked of it now (its
     * start announces the tip on the bus). The ask could only fail, and its HTTP client (undici, a
     * megabyte of modules) was the one thing loading it before the platform was up.
     */
    medullaInProcess?: boolean;
  } = {},
): Promise<Platform> {
  const log = opts.log ?? createLogger({ level: config.logLevel, format: config.logFormat, name: opts.name ?? 'cog' });
  fs.mkdirSync(config.dataDir, { recursive: true });
  const masterKey = loadMasterKey(config);
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
    sharedBuffersMb: config.pgliteSharedBuffersMb,
    pgliteThread: config.pgliteThread,
  });
  const bus = await createBus({
    natsUrl: config.natsUrl,
    stream: config.natsStream,
    subjectPrefix: config.natsPrefix,
    memory: { journalDir: path.join(config.dataDir, 'bus') },
  });
  const cache = await createCache({ redisUrl: config.redisUrl, keyPrefix: config.redisPrefix });
  const objects = await createObjectStore({
    s3: config.s3.endpoint ? { ...config.s3, endpoint: config.s3.endpoint } : undefined,
    dir: path.join(config.dataDir, 'objects'),
  });
  const epochs = await followEpochs(bus, () => medullaInfo(config.urls.medulla, config.internalToken), { seedNow: !opts.medullaInProcess });
  const p: Platform = { config, log, db, bus, cache, objects, epochs, masterKey, local: new Map(), ports: {} };
  observed.set(p, observePlatform(p));
  return p;
}

/** Each open platform's metrics registration (lib/metrics.ts), ended on close. */
const observed = new WeakMap<Platform, () => void>();

export async function closePlatform(p: Platform): Promise<void> {
  observed.get(p)?.();
  await p.epochs.close().catch(() => {});
  await p.bus.close().catch(() => {});
  await p.cache.close().catch(() => {});
  await p.objects.close().catch(() => {});
  await p.db.close().catch(() => {});
}
