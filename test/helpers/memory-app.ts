// Test harness for this suites: a test platform with the Hippocampus on port 0 and a
// fastify app carrying the stacks, sleeves and memory REST plugins (what the gateway mounts).
import type { FastifyInstance } from 'fastify';
import { createHttp } from '../../lib/http.ts';
import { testPlatform, type TestPlatform } from './platform.ts';
import stacksRest from '../../compat-rest/stacks.ts';
import sleevesRest from '../../compat-rest/sleeves.ts';
import memoryRest from '../../compat-rest/memory.ts';
import { startHippocampus } from '../../subgraphs/memory/hippocampus/service.ts';
import { localHippocampus } from '../../subgraphs/memory/hippocampus/client.ts';
import type { RunningService } from '../../lib/service.ts';
import { freshDatabase } from './postgres.ts';

export interface MemoryTestApp {
  p: TestPlatform;
  app: FastifyInstance;
  hippocampus: RunningService;
  close(): Promise<void>;
}

export async function memoryTestApp(env: Record<string, string> = {}): Promise<MemoryTestApp> {
  const p = await testPlatform({ HIPPOCAMPUS_PORT: '0', ...env });
  const hippocampus = await startHippocampus(p);
  p.config.urls.hippocampus = hippocampus.url!;
  // As the launcher wires a Hippocampus that runs in the process (bin/assembly.ts).
  p.ports.hippocampus = localHippocampus(p);
  const app = createHttp({ name: 'gateway-test', log: p.log });
  for (const plugin of [stacksRest, sleevesRest, memoryRest]) await app.register(plugin, { platform: p });
  await app.ready();
  return {
    p,
    app,
    hippocampus,
    async close() {
      await app.close();
      await hippocampus.close();
      await p.cleanup();
    },
  };
}

/** memoryTestApp on an engine: in-memory PGlite, or a fresh PostgreSQL database that close() drops. */
export async function memoryTestAppOn(engine: 'pglite' | 'postgres'): Promise<MemoryTestApp> {
  if (engine === 'pglite') return memoryTestApp();
  const fresh = await freshDatabase();
  const t = await memoryTestApp({ DATABASE_URL: fresh.url });
  return {
    ...t,
    async close() {
      await t.close();
      await fresh.drop();
    },
  };
}
