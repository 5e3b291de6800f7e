// Fault hooks for the fault suites' child processes, loaded by the preload fault-hooks.mjs (which
// startCluster's `needlecastFaults` puts in NODE_OPTIONS). It injects the needlecast saga's fault hooks
// through the composition root before any service starts, so the product reads no test switch.
//   COG_TEST_NEEDLECAST_FAIL_AT=<step>: that step's transaction throws after its effects.
//   COG_TEST_NEEDLECAST_CRASH_AFTER=<step>[,<step>...]: the router kills itself (SIGKILL) right
//   after the step is persisted, once per step and data dir (a marker file under
//   $COG_DATA_DIR/faults/ remembers it), so the restarted router recovers the saga (recovery runs
//   without the hook, so it never crashes).
import fs from 'node:fs';
import path from 'node:path';
import { injectServiceOptions } from '../../bin/services.ts';
import type { SagaOptions, StepName } from '../../subgraphs/sleeves/index.ts';

const failAt = process.env.COG_TEST_NEEDLECAST_FAIL_AT || undefined;
const crashAfter = (process.env.COG_TEST_NEEDLECAST_CRASH_AFTER ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);

function crashHook(dataDir: string): SagaOptions['afterStep'] {
  const dir = path.join(dataDir, 'faults');
  return (step) => {
    if (!crashAfter.includes(step)) return;
    const marker = path.join(dir, `needlecast-crash-${step}`);
    if (fs.existsSync(marker)) return;
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(marker, String(Date.now()));
    process.kill(process.pid, 'SIGKILL');
  };
}

if (failAt || crashAfter.length) {
  const dataDir = process.env.COG_DATA_DIR;
  if (crashAfter.length && !dataDir) throw new Error('fault-hooks: COG_TEST_NEEDLECAST_CRASH_AFTER needs COG_DATA_DIR');
  injectServiceOptions({
    needlecast: { failAt: failAt as StepName | undefined, afterStep: crashAfter.length ? crashHook(path.resolve(dataDir!)) : undefined },
  });
}
