// The V8 flags every long-running platform process starts with: `npm start` (package.json),
// `cog up` (bin/up.ts, each service), deploy/Procfile and deploy/compose.yaml; test/node-flags.test.ts
// keeps those in step with this list. They must be on the command line: V8 sizes its heap when the
// process starts, and v8.setFlagsFromString afterwards changes nothing (checked).
//
// --max-semi-space-size=64: the young generation may grow to 64 MB semi-spaces instead of 16. Under
// the perceive load the platform allocates 300-400 MB a second, mostly objects that live for one
// request or one write batch (10-30 ms). With 16 MB semi-spaces a scavenge came every 40-50 ms, so
// a batch's rows and the requests waiting on it survived two and were promoted (old space grew by
// 16 MB a second and needed major GCs). The space grows only as far as a process's survival rate
// asks: an idle service keeps the small default. On the whole platform (32 clients perceiving over
// PostgreSQL, 20 s, alternating runs): 2,929-2,936 -> 3,339-3,408 req/s, the platform's CPU a
// perceive 0.238 -> 0.195-0.201 ms, its GC helper threads 0.035 -> 0.023-0.027 ms.
export const PLATFORM_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
