// The black-box end-to-end suite (test/e2e/suite.ts) and every GraphQL subscription
// (test/e2e/subscriptions.ts) against `cog start`: the whole platform in
// one process with its embedded adapters (PGlite, in-process bus, memory cache, files, anvil), on
// ports shifted by +26000.
import { afterAll, beforeAll } from 'vitest';
import { startCluster, type Cluster } from '../helpers/cluster.ts';
import { registerE2eSuite } from './suite.ts';
import { registerSubscriptionSuite } from './subscriptions.ts';

let c: Cluster;

beforeAll(async () => {
  c = await startCluster({ mode: 'embedded', shift: 26000 });
  await c.waitHealthy(150_000);
}, 170_000);

afterAll(async () => {
  await c?.stop();
}, 30_000);

registerE2eSuite(() => c, 'embedded');
registerSubscriptionSuite(() => c);
