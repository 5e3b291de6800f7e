import { useCallback, useEffect, useRef, useState } from 'react';
import { ErrorBox, Hash, VirtualList, fmt, useAction, useEpoch } from '../components.tsx';
import { gql } from '../gql.ts';
import { href, useLive } from '../hooks.ts';

const PAGE = 100;
const ROW = 30;
const NODES =
  'query($id: ID!, $first: Int!, $offset: Int!) { stack(id: $id) { memoryCount memory(first: $first, offset: $offset) { cid epoch kind pinned readableUntilEpoch branchId sleeveId links } } }';
const SUB = 'subscription($id: ID!, $after: String) { perceived(stackId: $id, after: $after) { cursor cid epoch sleeveId } }';

interface Node {
  cid: string;
  epoch: number;
  kind: string;
  pinned: boolean;
  readableUntilEpoch: number | null;
  branchId: string | null;
  sleeveId: string | null;
  links: string[];
}

/**
 * The stack's DAG from the head back, newest first: a virtualised timeline that loads pages of
 * 100 nodes as they scroll into view, refreshed by the `perceived` subscription.
 */
export function Memory({ stackId, sleeves, onChange }: { stackId: string; sleeves: any[]; onChange: () => void }) {
  const { epoch } = useEpoch();
  const [count, setCount] = useState(0);
  const [version, setVersion] = useState(0);
  const pages = useRef(new Map<number, Node[]>());
  const loading = useRef(new Set<number>());
  const [error, setError] = useState<Error>();
  const [broken, setBroken] = useState<Set<string>>(new Set());

  const load = useCallback(
    (page: number, fresh = false) => {
      if (loading.current.has(page) && !fresh) return;
      loading.current.add(page);
      gql(NODES, { id: stackId, first: PAGE, offset: page * PAGE })
        .then((d) => {
          if (fresh) pages.current.clear();
          pages.current.set(page, d.stack?.memory ?? []);
          setCount(d.stack?.memoryCount ?? 0);
          setVersion((v) => v + 1);
          setError(undefined);
        })
        .catch(setError)
        .finally(() => loading.current.delete(page));
    },
    [stackId],
  );

  useEffect(() => {
    pages.current.clear();
    loading.current.clear();
    load(0, true);
  }, [load]);
  // A new node shifts every row by one: start again from the head.
  useLive(
    SUB,
    { id: stackId },
    'perceived',
    () => {
      loading.current.clear();
      load(0, true);
      onChange();
    },
    [stackId],
  );

  const item = (i: number): Node | undefined => {
    const page = Math.floor(i / PAGE);
    const p = pages.current.get(page);
    if (!p) {
      queueMicrotask(() => load(page));
      return undefined;
    }
    return p[i % PAGE];
  };
  void version;
  const branches = new Set<string>();
  for (const p of pages.current.values()) for (const n of p) if (n.branchId) branches.add(n.branchId);
  return (
    <div data-testid="memory">
      <p className="muted">
        {count} node{count === 1 ? '' : 's'} from the head back · readable within 2 epochs of writing unless pinned · now epoch {epoch ?? '…'}
        {branches.size ? ` · ${branches.size} shadow branch${branches.size === 1 ? '' : 'es'} in view` : ''}
      </p>
      <ErrorBox error={error} />
      <div className="vhead">
        <span>epoch</span>
        <span>kind</span>
        <span>state</span>
        <span>cid</span>
        <span>branch</span>
        <span>sleeve</span>
      </div>
      <VirtualList<Node>
        testId="memory-timeline"
        count={count}
        rowHeight={ROW}
        height={360}
        item={item}
        row={(n) => (n ? <NodeRow n={n} epoch={epoch} broken={broken.has(n.cid)} /> : <span className="muted">loading…</span>)}
      />
      <Recall stackId={stackId} sleeves={sleeves} onResult={(b) => setBroken(new Set(b))} onDone={onChange} />
    </div>
  );
}

function NodeRow({ n, epoch, broken }: { n: Node; epoch: number | null; broken: boolean }) {
  let state: React.ReactNode;
  if (n.pinned) state = <span className="pill pinned">pinned</span>;
  else if (epoch === null || n.readableUntilEpoch === null) state = <span className="muted">…</span>;
  else if (epoch <= n.readableUntilEpoch)
    state = (
      <span className="pill readable" title={`readable until epoch ${n.readableUntilEpoch}`}>
        readable · fades after {n.readableUntilEpoch} ({n.readableUntilEpoch - epoch + 1} left)
      </span>
    );
  else
    state = (
      <span className="pill gated" title={`gated since epoch ${n.readableUntilEpoch + 1}`}>
        gated since {n.readableUntilEpoch + 1}
      </span>
    );
  return (
    <div className={`node ${broken ? 'broken' : ''} ${n.branchId ? 'shadow' : ''}`} data-cid={n.cid}>
      <span>{n.epoch}</span>
      <span>{n.kind}</span>
      <span>
        {state}
        {broken ? <span className="pill bad">broken</span> : null}
      </span>
      <span>
        <Hash value={n.cid} n={18} />
      </span>
      <span>
        {n.branchId ? (
          <span className="pill shadow" title={n.branchId}>
            shadow
          </span>
        ) : (
          <span className="muted">main</span>
        )}
      </span>
      <span>
        <Hash value={n.sleeveId} n={10} />
      </span>
    </div>
  );
}

function Recall({ stackId, sleeves, onResult, onDone }: { stackId: string; sleeves: any[]; onResult: (broken: string[]) => void; onDone: () => void }) {
  const [depth, setDepth] = useState(8);
  const alive = sleeves.filter((s) => s.alive && !s.frozen);
  const [sleeveId, setSleeveId] = useState('');
  const a = useAction();
  const [r, setR] = useState<any>();
  const go = () =>
    a.run(
      () =>
        gql(
          'mutation($s: ID!, $d: Int!, $v: ID) { recall(stackId: $s, depth: $d, sleeveId: $v) { fidelity broken brokenCount effectiveDepth sleeveId cost { memory } fragments { cid epoch text } residue { id kind bounty } } }',
          { s: stackId, d: depth, v: sleeveId || null },
          stackId,
        ),
      (res) => {
        setR(res.recall);
        onResult(res.recall.broken);
        onDone();
      },
    );
  return (
    <div className="recall">
      <div className="form">
        <label>
          depth <input type="number" min={1} max={1000} value={depth} onChange={(e) => setDepth(Number(e.target.value))} style={{ width: 70 }} />
        </label>
        <select value={sleeveId} onChange={(e) => setSleeveId(e.target.value)} aria-label="paying sleeve">
          <option value="">any alive sleeve pays</option>
          {alive.map((s) => (
            <option key={s.id} value={s.id}>
              {s.embodimentType} {s.id.slice(-8)}
            </option>
          ))}
        </select>
        <button type="button" disabled={a.busy} onClick={go} data-testid="recall">
          Recall
        </button>
      </div>
      <ErrorBox error={a.error} />
      {r ? (
        <div className="recall-result" data-testid="recall-result">
          <p>
            fidelity{' '}
            <b className={r.fidelity < 0.6 ? 'bad' : 'good'} data-testid="fidelity">
              {fmt(r.fidelity, 3)}
            </b>{' '}
            · {r.fragments.length} readable · {r.brokenCount} broken · depth {r.effectiveDepth} · cost {fmt(r.cost.memory, 1)} memory
            {r.residue ? (
              <>
                {' '}
                · opened <a href={href('residues')}>{r.residue.kind}</a> ({r.residue.bounty} RT)
              </>
            ) : null}
          </p>
          <ul className="fragments">
            {r.fragments.map((f: any) => (
              <li key={f.cid}>
                <span className="muted">epoch {f.epoch}</span> {f.text}
              </li>
            ))}
            {r.broken.map((c: string) => (
              <li key={c} className="bad">
                broken <Hash value={c} n={18} />
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </div>
  );
}
