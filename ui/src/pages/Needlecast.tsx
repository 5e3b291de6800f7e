import { useEffect, useState } from 'react';
import { Card, ErrorBox, Hash, fmt, useAction } from '../components.tsx';
import { gql, lastCursor, live } from '../gql.ts';
import { href, useQuery } from '../hooks.ts';

const STEPS = ['freeze', 'shard', 'pin', 'anchor', 'reconstruct', 'settle'];
const SAGA_FIELDS =
  'id ok status stackId from to toKind route routeHash shards deltaEpoch error createdAt cost { routing memory } steps { name alias status at }';
const SUB = 'subscription($id: ID!, $after: String) { needlecastProgress(sagaId: $id, after: $after) { cursor step status } }';

interface Step {
  name: string;
  alias: string | null;
  status: string;
  at: string | null;
}

const newSagaId = () => `needle:${[...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, '0')).join('')}`;

export function Needlecast({ sagaId, params }: { sagaId?: string; params: URLSearchParams }) {
  return (
    <div className="grid" data-testid="page-needlecast">
      <Start stackId={params.get('stack') ?? ''} />
      {sagaId ? <Saga id={sagaId} /> : <p className="muted wide">Start a needlecast, or open one from its id (#/needlecast/needle:…).</p>}
    </div>
  );
}

function Start({ stackId: initial }: { stackId: string }) {
  const [stackId, setStackId] = useState(initial);
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('ai');
  const sleeves = useQuery('query($id: ID!) { stack(id: $id) { id sleeves { id embodimentType alive frozen } } }', { id: stackId }, [stackId], !stackId);
  const alive = (sleeves.data?.stack?.sleeves ?? []).filter((s: any) => s.alive && !s.frozen);
  useEffect(() => {
    if (alive.length && !alive.some((s: any) => s.id === from)) setFrom(alive[0].id);
  }, [alive, from]);
  const a = useAction();
  const start = () => {
    // The saga id is ours, so the timeline's subscription is open before the first step runs.
    const id = newSagaId();
    location.hash = `${href('needlecast', id)}?stack=${encodeURIComponent(stackId)}`;
    setTimeout(
      () =>
        a
          .run(() => gql(`mutation($i: NeedlecastInput!) { needlecast(input: $i) { ok sagaId status } }`, { i: { from, to, sagaId: id } }, stackId))
          .finally(() => window.dispatchEvent(new CustomEvent('cog:saga', { detail: id }))),
      150,
    );
  };
  return (
    <Card title="Needlecast" className="wide">
      <div className="form">
        <input
          placeholder="stack id"
          value={stackId}
          onChange={(e) => setStackId(e.target.value.trim())}
          style={{ width: 340 }}
          data-testid="nc-stack"
          aria-label="stack id"
        />
        <select value={from} onChange={(e) => setFrom(e.target.value)} data-testid="nc-from" aria-label="source sleeve">
          {alive.map((s: any) => (
            <option key={s.id} value={s.id}>
              {s.embodimentType} {s.id.slice(-8)}
            </option>
          ))}
        </select>
        →
        <select value={to} onChange={(e) => setTo(e.target.value)} data-testid="nc-to" aria-label="target kind">
          {['human', 'ai', 'mining', 'memory'].map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
        <button type="button" disabled={a.busy || !from} onClick={start} data-testid="nc-start">
          Needlecast
        </button>
      </div>
      <ErrorBox error={a.error ?? sleeves.error} />
    </Card>
  );
}

function Saga({ id }: { id: string }) {
  const q = useQuery(`query($id: ID!) { saga(id: $id) { ${SAGA_FIELDS} } }`, { id }, [id]);
  const [events, setEvents] = useState<Record<string, string>>({});
  const [log, setLog] = useState<{ step: string; status: string; at: number }[]>([]);
  useEffect(() => {
    setEvents({});
    setLog([]);
    // From the newest cursor this page has seen: the saga's first step cannot be missed.
    return live<{ cursor: string; step: string; status: string }>(SUB, { id, after: lastCursor() }, 'needlecastProgress', (e) => {
      setEvents((m) => ({ ...m, [e.step]: e.status }));
      setLog((l) => [...l, { step: e.step, status: e.status, at: Date.now() }]);
      q.reload();
    });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id]);
  useEffect(() => {
    const on = (e: Event) => (e as CustomEvent).detail === id && q.reload();
    window.addEventListener('cog:saga', on);
    return () => window.removeEventListener('cog:saga', on);
  }, [id, q.reload]);
  const s = q.data?.saga;
  const steps: Step[] = STEPS.map((name) => {
    const fromSaga = s?.steps.find((x: Step) => x.name === name);
    const ev = events[name];
    return {
      name,
      alias: fromSaga?.alias ?? null,
      status: fromSaga && fromSaga.status !== 'pending' ? fromSaga.status : (ev ?? fromSaga?.status ?? 'pending'),
      at: fromSaga?.at ?? null,
    };
  });
  const status = s?.status ?? (events.saga ? events.saga : 'starting');
  const running = status === 'running' || status === 'starting';
  const next = steps.findIndex((x) => x.status === 'pending');
  return (
    <Card
      title={
        <>
          Saga <Hash value={id} n={12} />
        </>
      }
      className="wide"
      right={
        <span className={`pill ${status}`} data-testid="saga-status">
          {status}
        </span>
      }
    >
      <ErrorBox error={q.error} />
      <ol className="steps" data-testid="saga-steps">
        {steps.map((st, i) => (
          <li key={st.name} className={`${st.status} ${running && i === next ? 'current' : ''}`} data-step={st.name} data-status={st.status}>
            <b>
              {i + 1}. {st.name}
            </b>
            {st.alias ? <span className="muted"> {st.alias}</span> : null}
            <span className="st">{running && i === next ? 'in progress' : st.status}</span>
            {st.at ? <span className="muted">{new Date(st.at).toLocaleTimeString()}</span> : null}
          </li>
        ))}
      </ol>
      {s ? (
        <dl className="facts">
          <dt>stack</dt>
          <dd>
            <a href={href('stacks', s.stackId)}>{s.stackId}</a>
          </dd>
          <dt>from → to</dt>
          <dd>
            <Hash value={s.from} n={14} /> → {s.to ? <Hash value={s.to} n={14} /> : `(${s.toKind}, spawned at reconstruct)`}
          </dd>
          <dt>route</dt>
          <dd>
            {s.route.join(' → ')}{' '}
            {s.routeHash ? (
              <>
                · anchored <Hash value={s.routeHash} n={12} />
              </>
            ) : null}
          </dd>
          <dt>shards moved</dt>
          <dd data-testid="saga-shards">
            {s.shards.length}{' '}
            {s.shards.length ? (
              <ul className="plain">
                {s.shards.map((c: string) => (
                  <li key={c}>
                    <Hash value={c} n={20} />
                  </li>
                ))}
              </ul>
            ) : null}
          </dd>
          <dt>cost</dt>
          <dd>
            {fmt(s.cost.routing, 2)} routing, {fmt(s.cost.memory, 2)} memory · Δepoch {s.deltaEpoch}
          </dd>
          {s.error ? (
            <>
              <dt>error</dt>
              <dd className="bad">{s.error}</dd>
            </>
          ) : null}
        </dl>
      ) : (
        <p className="muted">waiting for the saga to start…</p>
      )}
      <details>
        <summary>events ({log.length})</summary>
        <ul className="plain">
          {log.map((l) => (
            <li key={`${l.at}:${l.step}:${l.status}`}>
              <code>{l.step}</code> {l.status} <span className="muted">{new Date(l.at).toLocaleTimeString()}</span>
            </li>
          ))}
        </ul>
      </details>
    </Card>
  );
}
