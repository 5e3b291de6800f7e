// The fault suites' preload (NODE_OPTIONS=--import <this file>; see faultHooksEnv in cluster.ts),
// plain JavaScript because Node 20 cannot --import TypeScript by itself: it registers tsx (as
// bin/cog.mjs does) and loads the hooks from fault-hooks.ts. Only on the main thread (worker
// threads inherit NODE_OPTIONS). `--import tsx --import fault-hooks.ts` is no substitute: on Node
// 20 with tsx 4 it hung the gateway's start in `cog start`.
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./fault-hooks.ts');
}
