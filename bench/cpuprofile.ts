// Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time by package (node_modules/<name>,
// node: internals, or the project's own files) and the top functions by self time.
//   npx tsx bench/cpuprofile.ts FILE.cpuprofile [--last=SECONDS] [--top=N]
// --last keeps only the samples of the profile's last SECONDS (the load window, not the start).
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export function packageOf(url: string): string {
  if (!url) return '(native / idle / gc)';
  if (url.startsWith('node:')) return 'node: internals';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  const own = /\/(lib|subgraphs|flows|router|compat-rest|bin|mcp|generated)\//.exec(url);
  return own ? `(ours) ${own[1]}/` : url;
}

export function summarise(p: Profile, lastSeconds?: number, top = 25): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let t = p.startTime;
  const from = lastSeconds ? p.endTime - lastSeconds * 1e6 : -Infinity;
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i]!;
    if (t < from) continue;
    const dt = p.timeDeltas[i + 1] ?? 0;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
    total += dt;
  }
  const pkg = new Map<string, number>();
  const fn = new Map<string, number>();
  let idle = 0;
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName;
    if (name === '(idle)' || name === '(program)') {
      idle += name === '(idle)' ? us : 0;
    }
    const k = name === '(idle)' ? '(idle)' : name === '(garbage collector)' ? '(gc)' : packageOf(n.callFrame.url);
    pkg.set(k, (pkg.get(k) ?? 0) + us);
    const f = `${name || '(anonymous)'} ${n.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(lib|subgraphs|flows|router|compat-rest|bin)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
    fn.set(f, (fn.get(f) ?? 0) + us);
  }
  // Inclusive time of the project's own functions: a sample counts once for every distinct one of
  // them on its stack (synchronous stacks only: time after an await shows under the microtask).
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const names = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (packageOf(f.url).startsWith('(ours)'))
        names.add(`${f.functionName || '(anonymous)'} ${f.url.replace(/^.*?\/(lib|subgraphs|flows|router|compat-rest|bin|mcp)\//, '$1/')}:${f.lineNumber + 1}`);
    }
    for (const k of names) inclusive.set(k, (inclusive.get(k) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number, of: number) => `${((100 * us) / of).toFixed(1)}%`;
  const lines = [`${(total / 1e6).toFixed(1)} s sampled, busy ${pct(busy, total)} (shares below are of busy time)`, '', 'by package:'];
  for (const [k, us] of [...pkg]
    .filter(([k]) => k !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`  ${pct(us, busy).padStart(6)}  ${k}`);
  lines.push('', 'top functions (self):');
  for (const [k, us] of [...fn]
    .filter(([k]) => !k.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`  ${pct(us, busy).padStart(6)}  ${k}`);
  lines.push('', 'our functions (inclusive, synchronous part):');
  for (const [k, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(us, busy).padStart(6)}  ${k}`);
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const last = Number(process.argv.find((a) => a.startsWith('--last='))?.slice(7)) || undefined;
  const top = Number(process.argv.find((a) => a.startsWith('--top='))?.slice(6)) || 25;
  for (const f of files) {
    console.log(`== ${f}`);
    console.log(summarise(JSON.parse(fs.readFileSync(f, 'utf8')) as Profile, last, top));
  }
}
