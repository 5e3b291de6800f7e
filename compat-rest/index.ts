// The spec's /v1 REST routes on the gateway: one fastify plugin per context, each mapping routes
// onto that context's domain functions (no business rule lives here).
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';

export type RestPlugin = (app: FastifyInstance, opts: { platform: Platform }) => Promise<void>;

const plugins: Array<() => Promise<{ default: RestPlugin }>> = [
  () => import('./stacks.ts'),
  () => import('./sleeves.ts'),
  () => import('./memory.ts'),
  () => import('./economy.ts'),
  () => import('./residues.ts'),
  () => import('./needlecast.ts'),
  () => import('./chains.ts'),
];

export async function registerRest(app: FastifyInstance, platform: Platform): Promise<void> {
  for (const load of plugins) await app.register((await load()).default, { platform });
}
