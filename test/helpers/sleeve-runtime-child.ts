// A sleeve runtime in its own process over a given PostgreSQL database (test/sleeve-runtimes.test.ts
// kills it with -9): DATABASE_URL, RUNTIME_ID, LEASE_MS. Prints one JSON line when it runs, then one
// per tick event ({ticked: [sleeve ids]}), which its own bus carries.
import { testPlatform } from './platform.ts';
import { startRuntime } from '../../subgraphs/sleeves/runtime/runtime.ts';

const p = await testPlatform({ DATABASE_URL: process.env.DATABASE_URL! });
const rt = await startRuntime(p, { id: process.env.RUNTIME_ID!, leaseMs: Number(process.env.LEASE_MS ?? 1000), reconcileMs: 60_000 });
process.stdout.write(`${JSON.stringify({ ready: true, id: rt.id, port: rt.port, pid: process.pid })}\n`);
await p.bus.subscribe({ subjects: ['cog.sleeve.tick'] }, (d) => {
  const ticked = (d.data.sleeves as Array<{ sleeveId: string; ok: boolean }>).filter((x) => x.ok).map((x) => x.sleeveId);
  process.stdout.write(`${JSON.stringify({ ticked })}\n`);
});
process.on('SIGTERM', () => void rt.close().then(() => p.cleanup().then(() => process.exit(0))));
