// Sleeve runtime service: the leased sleeves' tick loops and identity endpoints (see runtime.ts).
import type { ServiceStarter } from '../../../lib/service.ts';
import { startRuntime } from './runtime.ts';

export const SLEEVE_RUNTIME_LOCAL = 'sleeve-runtime';

export const startSleeveRuntime: ServiceStarter = async (p) => {
  const runtime = await startRuntime(p);
  p.local.set(SLEEVE_RUNTIME_LOCAL, runtime);
  return {
    name: 'sleeve-runtime',
    async close() {
      p.local.delete(SLEEVE_RUNTIME_LOCAL);
      await runtime.close();
    },
  };
};
