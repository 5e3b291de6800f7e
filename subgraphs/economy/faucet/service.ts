// The Bandwidth Faucet service (:7075).
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { faucetRoutes } from './routes.ts';

export const startFaucet: ServiceStarter = async (p) => {
  // Public per the spec's port map: no internal token.
  const app = createHttp({ name: 'faucet', log: p.log, opsToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'faucet', needs: ['database', 'cache'], public: true });
  app.get('/health', async () => ({ ok: true, name: 'faucet', ts: Date.now() }));
  await app.register(faucetRoutes, { platform: p });
  const port = await listen(app, 'faucet', p.config.host, p.config.ports.faucet);
  return { name: 'faucet', url: `http://127.0.0.1:${port}`, close: () => app.close() };
};
