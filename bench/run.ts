// `npm run bench`: every benchmark, one child process each (so one cannot skew the next), in
// sequence, printing each one's table. `npm run bench -- perceive recall` runs a subset.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ALL = ['crypto', 'miner', 'epochs', 'fold', 'perceive', 'recall', 'router', 'emission', 'saga', 'outbox', 'load', 'scrape', 'start', 'scale'];
const chosen = process.argv.slice(2).length ? process.argv.slice(2) : ALL;

let failed = 0;
for (const name of chosen) {
  if (!ALL.includes(name)) {
    console.error(`unknown benchmark ${name}; one of ${ALL.join(', ')}`);
    process.exit(2);
  }
  console.log(`\n## ${name}\n`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(here, `${name}.ts`)], { stdio: 'inherit', env: { ...process.env, LOG_LEVEL: 'silent' } });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
