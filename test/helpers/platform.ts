// A Platform for tests: in-memory PGlite (migrated), memory bus and cache, file objects under a
// temp dir, and an epoch source the test can advance by hand (no Medulla needed).
import { wirePlatform } from '../../bin/assembly.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../lib/config.ts';
import { createLogger } from '../../lib/log.ts';
import { openDatabase } from '../../lib/db/index.ts';
import { createBus } from '../../lib/bus/index.ts';
import { createCache } from '../../lib/cache/index.ts';
import { createObjectStore } from '../../lib/objects/index.ts';
import type { EpochInfo, EpochSource } from '../../lib/epoch.ts';
import { randomSecret } from '../../lib/crypto.ts';
import type { Platform } from '../../lib/platform.ts';

export interface TestPlatform extends Platform {
  /** Sets the current epoch (and notifies onAdvance listeners). */
  setEpoch(epoch: number): void;
  cleanup(): Promise<void>;
}

export function manualEpochs(start = 0): EpochSource & { set(epoch: number): void } {
  let info: EpochInfo = { epoch: start, height: start, tip: '0'.repeat(64) };
  const listeners = new Set<(i: EpochInfo) => void>();
  return {
    // The test drives the epoch: it is the authority a write takes its epoch from.
    authoritative: true,
    current: () => info.epoch,
    info: () => info,
    // The test drives the epoch; what Medulla says does not move it.
    observe() {},
    refresh: async () => info,
    onAdvance(cb) {
      listeners.add(cb);
      return () => listeners.delete(cb);
    },
    set(epoch: number) {
      info = { epoch, height: epoch, tip: epoch.toString(16).padStart(64, '0') };
      for (const l of listeners) l(info);
    },
    close: async () => {},
  };
}

export async function testPlatform(env: Record<string, string> = {}): Promise<TestPlatform> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-test-'));
  const config: Config = loadConfig({ COG_DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...env });
  const log = createLogger({ level: env.LOG_LEVEL ?? 'silent' });
  // PGlite in the temp dir unless the caller names a PostgreSQL database (benchmarks, fault suites):
  // a copy of the migrated template opens in about 0.5 s where an in-memory cluster ran initdb and
  // every migration (2.5 s), and 16 MB of shared buffers (a test's tables are small) spare the
  // page faults of 128 (lib/db/index.ts).
  const db = await openDatabase(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL, dataDir, poolSize: 20 } : { dataDir, sharedBuffersMb: 16 });
  const bus = await createBus({});
  const cache = await createCache({});
  const objects = await createObjectStore({ dir: path.join(dataDir, 'objects') });
  const epochs = manualEpochs();
  const p: TestPlatform = {
    config,
    log,
    db,
    bus,
    cache,
    objects,
    epochs,
    masterKey: randomSecret(32),
    local: new Map(),
    ports: {},
    setEpoch: (e) => epochs.set(e),
    async cleanup() {
      await bus.close().catch(() => {});
      await cache.close().catch(() => {});
      await objects.close().catch(() => {});
      await db.close().catch(() => {});
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  // As the launcher does for every process (bin/assembly.ts).
  wirePlatform(p);
  return p;
}

/** A test platform on PGlite, or on a fresh database of this machine's PostgreSQL (dropped by its cleanup). */
export async function testPlatformOn(engine: 'pglite' | 'postgresql'): Promise<TestPlatform> {
  if (engine === 'pglite') return testPlatform();
  const { freshDatabase } = await import('./postgres.ts');
  const fresh = await freshDatabase();
  const p = await testPlatform({ DATABASE_URL: fresh.url }).catch(async (e: unknown) => {
    await fresh.drop();
    throw e;
  });
  const cleanup = p.cleanup;
  p.cleanup = async () => {
    await cleanup();
    await fresh.drop();
  };
  return p;
}
