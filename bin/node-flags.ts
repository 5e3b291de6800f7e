// The V8 flags every long-running platform process starts with: `npm start` (package.json),
// `cog up` (bin/up.ts, each service), deploy/Procfile and deploy/compose.yaml;
// test/foundation/topology.test.ts keeps those in step with this list. They must be on the command
// line: V8 sizes its heap when the process starts, and v8.setFlagsFromString afterwards changes
// nothing (checked).
//
// --max-semi-space-size=64: the young generation may grow to 64 MB semi-spaces instead of 16. Under
// the perceive load the platform allocates 300-400 MB a second, mostly objects that live for one
// request or one write batch (10-30 ms). With 16 MB semi-spaces a scavenge came every 40-50 ms, so
// a batch's rows and the requests waiting on it survived two and were promoted (old space grew by
// 16 MB a second and needed major GCs). The space grows only as far as a process's survival rate
// asks: an idle service keeps the small default. On the whole platform (32 clients perceiving over
// PostgreSQL, 20 s): 20 scavenges in 5 s instead of 78, GC 3% of the main thread instead of 5.3%;
// the rate gained in some alternating runs and not in others (docs/decisions.md).
export const PLATFORM_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
