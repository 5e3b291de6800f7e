// deploy/grafana-dashboard.json: its four rows, and every query names metrics the platform exports
// (lib/metrics.ts registers the kernel's at import, each context's door its own: bin/assembly.ts
// imports every door a process wires), with label matchers on labels those metrics have.
import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import { metricNames, registry } from '../../lib/metrics.ts';
import '../../bin/assembly.ts';

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}
const dash = JSON.parse(fs.readFileSync(new URL('../../deploy/grafana-dashboard.json', import.meta.url), 'utf8')) as {
  panels: Panel[];
  templating: { list: Array<{ name: string }> };
};

// Metric names in PromQL: identifiers that are not functions, keywords or label names.
const metricsIn = (expr: string) => [...expr.matchAll(/\b((?:cog|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
/** The base metric of a histogram's series (_bucket, _sum, _count). */
const base = (name: string) => name.replace(/_(bucket|sum|count)$/, '');

describe('the Grafana dashboard', () => {
  it('has the overview, hot path, chains and economy rows, each with panels', () => {
    const rows = dash.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows).toEqual(['Overview', 'Hot path', 'Chains', 'Economy']);
    expect(dash.panels.filter((p) => p.type !== 'row').length).toBeGreaterThanOrEqual(20);
    expect(dash.templating.list.map((v) => v.name)).toContain('datasource');
  });

  it('queries only metrics the platform exports, by labels they carry', async () => {
    const exported = new Set(await metricNames());
    const queries = dash.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    expect(queries.length).toBeGreaterThan(25);
    const used = new Set<string>();
    for (const q of queries) {
      const names = metricsIn(q.expr);
      expect(names.length, `${q.panel}: ${q.expr}`).toBeGreaterThan(0);
      for (const n of names) {
        expect(exported.has(n), `${q.panel}: ${n} is not exported`).toBe(true);
        used.add(base(n));
      }
      for (const m of q.expr.matchAll(/\b((?:cog|process|nodejs)_[a-z0-9_]+)\{([^}]*)\}/g)) {
        const metric = registry.getSingleMetric(base(m[1]!)) as unknown as { labelNames?: string[] } | undefined;
        for (const l of m[2]!.matchAll(/([a-z_]+)\s*(?:=~|!=|!~|=)/g)) {
          expect(metric?.labelNames ?? [], `${q.panel}: ${m[1]} has no label ${l[1]}`).toContain(l[1]);
        }
      }
    }
    // Every platform metric (cog_*) appears on the dashboard.
    const ours = [...exported].filter((n) => n.startsWith('cog_') && !/_(bucket|sum|count)$/.test(n));
    for (const n of ours) expect(used.has(n), `${n} is on no panel`).toBe(true);
  });
});
