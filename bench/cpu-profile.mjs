// Preload (`node --import ./bench/cpu-profile.mjs`) for profiling a platform under a bench's load:
// SIGUSR2 starts the V8 CPU profiler, the next SIGUSR2 stops it and writes
// $COG_CPU_PROFILE_DIR/cog-<pid>-<n>.cpuprofile (open in Chrome DevTools, or summarise with
// `npx tsx bench/profile-summary.ts <file>`). So the profile covers the measured window only, and it
// is written while the process still runs (`--cpu-prof` writes at exit, and NODE_OPTIONS refuses it).
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector/promises';

const dir = process.env.COG_CPU_PROFILE_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  let running = false;
  let n = 0;
  process.on('SIGUSR2', async () => {
    try {
      if (!running) {
        running = true;
        await session.post('Profiler.enable');
        await session.post('Profiler.setSamplingInterval', { interval: 1000 });
        await session.post('Profiler.start');
      } else {
        running = false;
        const { profile } = await session.post('Profiler.stop');
        fs.mkdirSync(dir, { recursive: true });
        const file = path.join(dir, `cog-${process.pid}-${++n}.cpuprofile`);
        fs.writeFileSync(`${file}.tmp`, JSON.stringify(profile));
        fs.renameSync(`${file}.tmp`, file);
      }
    } catch (e) {
      process.stderr.write(`cpu-profile: ${e.message}\n`);
    }
  });
}
