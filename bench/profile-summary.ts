// Summarises a .cpuprofile: self time by package / area and the top functions.
//   npx tsx bench/profile-summary.ts <file.cpuprofile> [top=25] [--windows=FILE]
// --windows: only the samples inside these time windows (a JSON array of [startUs, endUs] on the
// monotonic clock, process.hrtime in any process of the machine: V8 stamps its samples on the
// same clock), e.g. the requests of a bench (bench/recall.ts --profile writes one per depth).
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  startTime: number;
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

export function areaOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url;
  const mine = /\/(lib|subgraphs|flows|router|compat-rest|bin|mcp|generated)\//.exec(url);
  return mine ? `cog ${mine[1]}` : url;
}

export function summarise(p: Profile, top = 25, windows?: ReadonlyArray<readonly [number, number]>): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const sorted = windows ? [...windows].sort((a, b) => a[0] - b[0]) : undefined;
  let at = p.startTime;
  let w = 0;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] ?? 0;
    if (sorted) {
      while (w < sorted.length && sorted[w]![1] < at) w++;
      if (w === sorted.length || sorted[w]![0] > at) continue;
    }
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id)!;
    const a = areaOf(n.callFrame.url, n.callFrame.functionName);
    areas.set(a, (areas.get(a) ?? 0) + t);
    const f = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/wt-[^/]+\//, '')}:${n.callFrame.lineNumber + 1}`;
    fns.set(f, (fns.get(f) ?? 0) + t);
  }
  const pct = (t: number) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
  const inWindows = sorted ? `, inside ${sorted.length} windows of ${(sorted.reduce((t, [a, b]) => t + b - a, 0) / 1e3).toFixed(1)} ms` : '';
  const lines = [`${(total / 1e6).toFixed(3)} s sampled${inWindows}`, '', 'self time by area:'];
  for (const [a, t] of [...areas].sort((x, y) => y[1] - x[1]).slice(0, top)) lines.push(`  ${pct(t)}  ${a}`);
  lines.push('', 'top functions (self):');
  for (const [f, t] of [...fns].sort((x, y) => y[1] - x[1]).slice(0, top)) lines.push(`  ${pct(t)}  ${f}`);
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2]) {
  const windowsFile = process.argv.find((a) => a.startsWith('--windows='))?.slice('--windows='.length);
  const windows = windowsFile ? (JSON.parse(fs.readFileSync(windowsFile, 'utf8')) as Array<[number, number]>) : undefined;
  const top = Number(process.argv.slice(3).find((a) => !a.startsWith('--'))) || 25;
  console.log(summarise(JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as Profile, top, windows));
}
