import { createContext, useCallback, useContext, useRef, useState, type ReactNode } from 'react';

/** The live epoch and tip (App keeps it from epochAdvanced), for pages that show gating and ages. */
export const EpochContext = createContext<{ epoch: number | null; height: number | null; tip: string | null; cursor: string | null }>({
  epoch: null,
  height: null,
  tip: null,
  cursor: null,
});
export const useEpoch = () => useContext(EpochContext);

export const short = (h: string | null | undefined, n = 8) => (!h ? '—' : h.length <= n * 2 + 1 ? h : `${h.slice(0, n)}…${h.slice(-4)}`);
export const fmt = (x: number | null | undefined, d = 2) => (x === null || x === undefined ? '—' : Number.isInteger(x) ? String(x) : x.toFixed(d));

export function Hash({ value, n = 8 }: { value: string | null | undefined; n?: number }) {
  return (
    <code title={value ?? ''} className="hash">
      {short(value, n)}
    </code>
  );
}

export function ErrorBox({ error }: { error: Error | string | undefined | null }) {
  if (!error) return null;
  const e = typeof error === 'string' ? { message: error, code: undefined } : (error as Error & { code?: string });
  return (
    <div className="error" role="alert">
      {e.code ? <b>{e.code}: </b> : null}
      {e.message}
    </div>
  );
}

export function Card({ title, children, right, className }: { title: ReactNode; children: ReactNode; right?: ReactNode; className?: string }) {
  return (
    <section className={`card ${className ?? ''}`}>
      <header>
        <h2>{title}</h2>
        {right}
      </header>
      {children}
    </section>
  );
}

export interface Series {
  name: string;
  color: string;
  points: [number, number][];
}

/** A small SVG line plot: x ascending, one polyline per series, min/max labels, a legend. */
export function LinePlot({
  series,
  height = 140,
  yLabel,
  xLabel,
  testId,
}: {
  series: Series[];
  height?: number;
  yLabel?: string;
  xLabel?: string;
  testId?: string;
}) {
  const all = series.flatMap((s) => s.points);
  // Drawn at the container's own width, so text keeps its size whatever the layout.
  const [width, setWidth] = useState(560);
  const ro = useRef<ResizeObserver | null>(null);
  const measure = useCallback((el: HTMLElement | null) => {
    ro.current?.disconnect();
    if (!el) return;
    ro.current = new ResizeObserver(([e]) => setWidth(Math.max(200, Math.round(e.contentRect.width))));
    ro.current.observe(el);
  }, []);
  const W = width,
    H = height,
    L = 44,
    R = 8,
    T = 8,
    B = 22;
  if (new Set(all.map((p) => p[0])).size < 2)
    return (
      <div className="plot-empty" data-testid={testId} ref={measure}>
        not enough data yet
      </div>
    );
  const xs = all.map((p) => p[0]),
    ys = all.map((p) => p[1]);
  const x0 = Math.min(...xs),
    x1 = Math.max(...xs);
  let y0 = Math.min(0, ...ys),
    y1 = Math.max(...ys);
  if (y1 === y0) y1 = y0 + 1;
  const sx = (x: number) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
  const sy = (y: number) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  return (
    <figure className="plot" data-testid={testId} ref={measure}>
      <svg viewBox={`0 0 ${W} ${H}`} width={W} height={H} role="img" aria-label={yLabel ?? 'plot'}>
        <line x1={L} y1={H - B} x2={W - R} y2={H - B} className="axis" />
        <line x1={L} y1={T} x2={L} y2={H - B} className="axis" />
        <text x={L - 4} y={T + 8} textAnchor="end" className="tick">
          {fmt(y1, 1)}
        </text>
        <text x={L - 4} y={H - B} textAnchor="end" className="tick">
          {fmt(y0, 1)}
        </text>
        <text x={L} y={H - 6} className="tick">
          {fmt(x0, 0)}
        </text>
        <text x={W - R} y={H - 6} textAnchor="end" className="tick">
          {fmt(x1, 0)}
        </text>
        {xLabel ? (
          <text x={(W + L) / 2} y={H - 6} textAnchor="middle" className="tick">
            {xLabel}
          </text>
        ) : null}
        {series.map((s) => (
          <polyline
            key={s.name}
            fill="none"
            stroke={s.color}
            strokeWidth={1.8}
            points={s.points.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ')}
          />
        ))}
      </svg>
      <figcaption>
        {yLabel ? <span className="muted">{yLabel}</span> : null}
        {series.length > 1
          ? series.map((s) => (
              <span key={s.name} className="legend">
                <i style={{ background: s.color }} />
                {s.name}
              </span>
            ))
          : null}
      </figcaption>
    </figure>
  );
}

/** Drift as a bar against the flag line (drift maximum) and the desync line (twice it). */
export function DriftBar({ drift, flag, desync }: { drift: number; flag: number; desync: number }) {
  const max = desync * 1.15;
  const pct = (v: number) => `${Math.min(100, (v / max) * 100)}%`;
  const cls = drift > desync ? 'desync' : drift > flag ? 'flagged' : 'ok';
  return (
    <div className={`drift ${cls}`} title={`drift ${fmt(drift)}; flagged above ${flag}, desynced above ${desync}`} data-testid="drift">
      <div className="fill" style={{ width: pct(drift) }} />
      <div className="line flag" style={{ left: pct(flag) }} />
      <div className="line desync" style={{ left: pct(desync) }} />
      <span>
        {fmt(drift, 1)}
        {cls === 'flagged' ? ' · flagged' : cls === 'desync' ? ' · desync' : ''}
      </span>
    </div>
  );
}

/** A virtualised list: only the rows in view (and a few around) are in the DOM. */
export function VirtualList<T>({
  count,
  rowHeight,
  height,
  row,
  item,
  testId,
}: {
  count: number;
  rowHeight: number;
  height: number;
  item: (i: number) => T | undefined;
  row: (it: T | undefined, i: number) => ReactNode;
  testId?: string;
}) {
  const [top, setTop] = useState(0);
  const ref = useRef<HTMLDivElement>(null);
  const first = Math.max(0, Math.floor(top / rowHeight) - 5);
  const last = Math.min(count, Math.ceil((top + height) / rowHeight) + 5);
  const rows: ReactNode[] = [];
  for (let i = first; i < last; i++) {
    rows.push(
      <div key={i} className="vrow" style={{ top: i * rowHeight, height: rowHeight }}>
        {row(item(i), i)}
      </div>,
    );
  }
  return (
    <div
      ref={ref}
      className="vlist"
      style={{ height: Math.min(height, Math.max(rowHeight, count * rowHeight)) }}
      onScroll={(e) => setTop(e.currentTarget.scrollTop)}
      data-testid={testId}
    >
      <div style={{ height: count * rowHeight, position: 'relative' }}>{rows}</div>
    </div>
  );
}

export const TOKENS = ['compute', 'memory', 'sync', 'routing', 'residue'] as const;
export const TOKEN_COLORS: Record<string, string> = { compute: '#6cb6ff', memory: '#c297ff', sync: '#56d364', routing: '#e3b341', residue: '#ff7b72' };

export function Tokens({ t }: { t: Record<string, number> | undefined }) {
  if (!t) return null;
  return (
    <span className="tokens">
      {TOKENS.filter((k) => k in t).map((k) => (
        <span key={k} className="tok" style={{ borderColor: TOKEN_COLORS[k] }} title={k}>
          {k} {fmt(t[k], 1)}
        </span>
      ))}
    </span>
  );
}

export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  const [note, setNote] = useState<string>();
  const run = async <T,>(
    f: () => Promise<T>, // biome-ignore lint/suspicious/noConfusingVoidType: a callback may return a note or nothing
    done?: (r: T) => string | void,
  ): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    setNote(undefined);
    try {
      const r = await f();
      const n = done?.(r);
      if (n) setNote(n);
      return r;
    } catch (e) {
      setError(e as Error);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, note, run };
}
