// Summarises a .cpuprofile: self time by package / area and the top functions.
//   npx tsx bench/profile-summary.ts <file.cpuprofile> [top=25]
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
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

export function summarise(p: Profile, top = 25): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
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
  const lines = [`${(total / 1e6).toFixed(1)} s sampled`, '', 'self time by area:'];
  for (const [a, t] of [...areas].sort((x, y) => y[1] - x[1]).slice(0, top)) lines.push(`  ${pct(t)}  ${a}`);
  lines.push('', 'top functions (self):');
  for (const [f, t] of [...fns].sort((x, y) => y[1] - x[1]).slice(0, top)) lines.push(`  ${pct(t)}  ${f}`);
  return lines.join('\n');
}

if (process.argv[2]) console.log(summarise(JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as Profile, Number(process.argv[3]) || 25));
