// The Treasury service (:7074): issuance and claims over HTTP, and the durable slash consumer.
import { createHttp, listen } from '../../../lib/http.ts';
import { mountReadiness } from '../../../lib/ready.ts';
import type { ServiceStarter } from '../../../lib/service.ts';
import { startSlashConsumer } from '../slash.ts';
import { treasuryRoutes } from './routes.ts';

export const startTreasury: ServiceStarter = async (p) => {
  const app = createHttp({ name: 'treasury', log: p.log, internalToken: p.config.internalToken });
  mountReadiness(app, p, { name: 'treasury' });
  app.get('/health', async () => ({ ok: true, name: 'treasury', ts: Date.now() }));
  await app.register(treasuryRoutes, { platform: p });
  const slash = await startSlashConsumer(p);
  const port = await listen(app, 'treasury', p.config.host, p.config.ports.treasury);
  return {
    name: 'treasury',
    url: `http://127.0.0.1:${port}`,
    async close() {
      await slash.close();
      await app.close();
    },
  };
};
