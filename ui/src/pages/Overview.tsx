import { useState } from 'react';
import { Card, ErrorBox, Hash, LinePlot, fmt, useEpoch } from '../components.tsx';
import { useLive, useQuery } from '../hooks.ts';

const SPANS = [10, 30, 64];

const BLOCKS_Q = 'query($blocks: Int!) { recentBlocks(last: $blocks) { height ts } }';
const OVERVIEW = /* GraphQL */ `query Overview {
  coherenceTuples(last: 12) { epoch crossRoot evmRoot ipfsRoot sleevesRoot gaps submitted blockHeight chainStatus }
  servicesHealth { name ok latencyMs detail }
  stackPage(first: 0) { total }
  aliveSleeveCount
  residueCount(status: "open")
  hippocampusStats { nodes pinned peers }
  stacksHealth { ok name } sleevesHealth { ok name } memoryHealth { ok name } chainsHealth { ok name } economyHealth { ok name } residuesHealth { ok name }
}`;

export function Overview() {
  const live = useEpoch();
  const [span, setSpan] = useState(30);
  const initial = useQuery(BLOCKS_Q, { blocks: span }, [span]);
  const q = useQuery(OVERVIEW, {}, []);
  const [blocks, setBlocks] = useState<Map<number, { height: number; ts: number }>>(new Map());
  // New blocks arrive by subscription; the rest of the page is read again once per new block.
  useLive<{ cursor: string; height: number; block: { height: number; ts: number } | null }>(
    'subscription($after: String) { blockMined(after: $after) { cursor height block { height ts } } }',
    {},
    'blockMined',
    (e) => {
      if (e.block) {
        setBlocks((m) => {
          const next = new Map(m).set(e.block!.height, e.block!);
          for (const h of next.keys()) if (h <= e.block!.height - 70) next.delete(h); // a long session keeps a window, not every block
          return next;
        });
      }
      q.reload();
    },
    [],
  );
  const d = q.data;
  const all = new Map<number, { height: number; ts: number }>();
  for (const b of initial.data?.recentBlocks ?? []) all.set(b.height, b);
  for (const [h, b] of blocks) all.set(h, b);
  const sorted = [...all.values()].sort((a, b) => a.height - b.height).slice(-span - 1);
  // Genesis carries a fixed timestamp: its successor's interval says nothing about the cadence.
  const intervals: [number, number][] = sorted
    .slice(1)
    .flatMap((b, i) => (sorted[i].height === 0 || b.height !== sorted[i].height + 1 ? [] : [[b.height, b.ts - sorted[i].ts] as [number, number]]));
  const mean = intervals.length ? intervals.reduce((s, p) => s + p[1], 0) / intervals.length : null;
  const subgraphs = d ? ['stacks', 'sleeves', 'memory', 'chains', 'economy', 'residues'].map((n) => d[`${n}Health`]) : [];
  return (
    <div className="grid" data-testid="page-overview">
      <ErrorBox error={q.error ?? initial.error} />
      <Card
        title="Medulla"
        className="wide"
        right={
          // biome-ignore lint/a11y/useSemanticElements: a row of chips in a card's header; a fieldset's frame and legend do not belong there
          <span className="chips" role="group" aria-label="blocks shown">
            {SPANS.map((n) => (
              <button type="button" key={n} className={span === n ? 'on' : ''} onClick={() => setSpan(n)}>
                last {n}
              </button>
            ))}
          </span>
        }
      >
        <div className="big-stats">
          <div>
            <span className="caption">epoch</span>
            <b data-testid="epoch">{live.epoch ?? '…'}</b>
          </div>
          <div>
            <span className="caption">height</span>
            <b data-testid="height">{live.height ?? '…'}</b>
          </div>
          <div>
            <span className="caption">tip</span>
            <Hash value={live.tip} n={12} />
          </div>
          <div>
            <span className="caption">mean block interval</span>
            <b>{mean === null ? '—' : `${fmt(mean, 2)} s`}</b>
          </div>
        </div>
        <LinePlot
          testId="block-intervals"
          series={[{ name: 'interval', color: '#6cb6ff', points: intervals }]}
          yLabel={`block interval (s) over the last ${intervals.length} blocks`}
          xLabel="height"
        />
      </Card>
      <Card title="Counts">
        <dl className="counts">
          <dt>stacks</dt>
          <dd data-testid="count-stacks">{d?.stackPage.total ?? '…'}</dd>
          <dt>alive sleeves</dt>
          <dd data-testid="count-sleeves">{d?.aliveSleeveCount ?? '…'}</dd>
          <dt>open residues</dt>
          <dd data-testid="count-residues">
            <a href="#/residues">{d?.residueCount ?? '…'}</a>
          </dd>
          <dt>memory nodes</dt>
          <dd>
            {d?.hippocampusStats.nodes ?? '…'} <span className="muted">({d?.hippocampusStats.pinned ?? 0} pinned)</span>
          </dd>
        </dl>
      </Card>
      <Card title="Services">
        <ul className="health" data-testid="services">
          {(d?.servicesHealth ?? []).map((s: { name: string; ok: boolean; latencyMs: number; detail: string | null }) => (
            <li key={s.name} className={s.ok ? 'ok' : 'bad'}>
              <i />
              {s.name}
              <span className="muted">{s.ok ? `${s.latencyMs} ms` : s.detail}</span>
            </li>
          ))}
          {subgraphs.map((s: { ok: boolean; name: string }) => (
            <li key={s.name} className={s.ok ? 'ok' : 'bad'}>
              <i />
              subgraph {s.name}
            </li>
          ))}
        </ul>
      </Card>
      <Card title="Coherence tuples" className="wide">
        <table className="tuples" data-testid="tuples">
          <thead>
            <tr>
              <th>epoch</th>
              <th>crossRoot</th>
              <th>evmRoot</th>
              <th>ipfsRoot</th>
              <th>sleevesRoot</th>
              <th>gaps</th>
              <th>block</th>
              <th>Cortex</th>
            </tr>
          </thead>
          <tbody>
            {(d?.coherenceTuples ?? []).map((t: any) => (
              <tr key={t.epoch} className={t.gaps.length ? 'gap' : ''}>
                <td>{t.epoch}</td>
                <td>
                  <Hash value={t.crossRoot} />
                </td>
                <td>
                  <Hash value={t.evmRoot} />
                </td>
                <td>
                  <Hash value={t.ipfsRoot} />
                </td>
                <td>
                  <Hash value={t.sleevesRoot} />
                </td>
                <td>
                  {t.gaps.length ? (
                    t.gaps.map((g: string) => (
                      <span key={g} className="pill bad">
                        {g}
                      </span>
                    ))
                  ) : (
                    <span className="muted">none</span>
                  )}
                </td>
                <td>{t.blockHeight ?? (t.submitted ? 'submitted' : '—')}</td>
                <td>
                  <span className={`pill ${t.chainStatus}`}>{t.chainStatus}</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
    </div>
  );
}
