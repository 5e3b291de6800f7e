import { useState } from 'react';
import { Card, DriftBar, ErrorBox, Hash, LinePlot, TOKEN_COLORS, Tokens, fmt, useAction, useEpoch } from '../components.tsx';
import { gql } from '../gql.ts';
import { href, useLive, useQuery } from '../hooks.ts';
import { hasKey } from '../sign.ts';
import { Memory } from './Memory.tsx';

const STACK = /* GraphQL */ `query($id: ID!) {
  stack(id: $id) {
    id tokenId name kind pubKey epoch lastActiveEpoch episodicHead chainStatus createdAt
    cpv { syncCoeff memoryCoeff computeCoeff residueCoeff routingCoeff }
    binding { floor decayRate }
    anchors { epoch crossRoot ipfsRoot blockHash blockHeight chainStatus }
    sleeves { id embodimentType tickRate alive frozen drift syncEpoch lastSync hostname createdAt chainStatus tokens { compute memory sync routing residue } }
    balances { compute memory sync routing residue }
    claimable { compute memory sync routing }
    emissions(first: 100) { epoch ebcFactor amounts { compute memory sync routing } }
    balanceHistory(last: 100) { epoch raw { compute memory sync routing residue } }
    residues(first: 10) { id kind status bounty epoch trigger }
  }
  balances(stackId: $id) { raw { compute memory sync routing residue } effective { compute memory sync routing residue } ebcFactor currentEpoch lastActiveEpoch }
  driftLimits { flag desync }
}`;

const SUB_SLEEVES = 'subscription($id: ID!, $after: String) { sleeveChanged(stackId: $id, after: $after) { cursor type sleeveId } }';
const SUB_EMISSION = 'subscription($id: ID!, $after: String) { emission(stackId: $id, after: $after) { cursor epoch } }';

export function StackPage({ id }: { id: string }) {
  const q = useQuery(STACK, { id }, [id]);
  const { epoch } = useEpoch();
  useLive(SUB_SLEEVES, { id }, 'sleeveChanged', () => q.reload(), [id]);
  useLive(SUB_EMISSION, { id }, 'emission', () => q.reload(), [id]);
  const s = q.data?.stack;
  const b = q.data?.balances;
  if (q.error) return <ErrorBox error={q.error} />;
  if (!q.data) return <p className="muted">loading…</p>;
  if (!s)
    return (
      <p>
        No stack {id}. <a href="#/stacks">All stacks</a>
      </p>
    );
  const limits = q.data.driftLimits;
  const cpv = s.cpv;
  const emissions = [...s.emissions].reverse();
  const core = ['compute', 'memory', 'sync', 'routing'];
  return (
    <div className="grid" data-testid="page-stack">
      <Card
        title={
          <>
            {s.name || '(unnamed)'} <span className="muted">#{s.tokenId}</span>
          </>
        }
        className="wide"
        right={<a href={href('needlecast') + `?stack=${encodeURIComponent(s.id)}`}>needlecast…</a>}
      >
        <dl className="facts">
          <dt>id</dt>
          <dd>
            <code data-testid="stack-id">{s.id}</code>
          </dd>
          <dt>kind</dt>
          <dd>{s.kind}</dd>
          <dt>NFT token id</dt>
          <dd>
            #{s.tokenId} <span className={`pill ${s.chainStatus}`}>{s.chainStatus}</span>
          </dd>
          <dt>public key</dt>
          <dd>
            <Hash value={s.pubKey} n={16} />
          </dd>
          <dt>epoch</dt>
          <dd>
            {s.epoch}{' '}
            <span className="muted">
              (last active {s.lastActiveEpoch}, now {epoch ?? '…'})
            </span>
          </dd>
          <dt>episodic head</dt>
          <dd>
            <Hash value={s.episodicHead} n={16} />
          </dd>
          <dt>binding</dt>
          <dd>
            floor {s.binding.floor}, decay {s.binding.decayRate}/epoch <span className="muted">(EBC now {fmt(b?.ebcFactor, 3)})</span>
          </dd>
          <dt>signing</dt>
          <dd>{hasKey(s.id) ? <span className="pill confirmed">key held by this page</span> : <a href="#/keys">paste key to sign</a>}</dd>
        </dl>
        <div className="cpv" data-testid="cpv">
          {Object.entries(cpv).map(([k, v]) => (
            <div key={k} className="cpv-row">
              <span className="caption">{k.replace('Coeff', '')}</span>
              <div className="bar">
                <div style={{ width: `${(Number(v) / 2) * 100}%` }} />
              </div>
              <span>{fmt(Number(v))}</span>
            </div>
          ))}
        </div>
      </Card>
      <Card title="Sleeves" className="wide">
        <Sleeves stack={s} limits={limits} reload={q.reload} />
      </Card>
      <Card title="Balances">
        <table className="kv">
          <thead>
            <tr>
              <th />
              <th>raw</th>
              <th>effective</th>
              <th>claimable</th>
            </tr>
          </thead>
          <tbody>
            {['compute', 'memory', 'sync', 'routing', 'residue'].map((k) => (
              <tr key={k}>
                <td>
                  <i className="dot" style={{ background: TOKEN_COLORS[k] }} />
                  {k}
                </td>
                <td>{fmt(b?.raw[k], 1)}</td>
                <td>{fmt(b?.effective[k], 1)}</td>
                <td>{k in s.claimable ? fmt(s.claimable[k], 1) : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <StackActions stack={s} reload={q.reload} />
        <LinePlot
          testId="balance-plot"
          yLabel="raw balance (pool + sleeves) at the end of each epoch it changed"
          xLabel="epoch"
          series={['compute', 'memory', 'sync', 'routing', 'residue'].map((k) => ({
            name: k,
            color: TOKEN_COLORS[k],
            points: s.balanceHistory.map((p: any) => [p.epoch, p.raw[k]] as [number, number]),
          }))}
        />
      </Card>
      <Card title="Emission">
        <LinePlot
          testId="emission-plot"
          yLabel="units emitted per epoch (after CPV and EBC)"
          xLabel="epoch"
          series={core.map((k) => ({ name: k, color: TOKEN_COLORS[k], points: emissions.map((e: any) => [e.epoch, e.amounts[k]] as [number, number]) }))}
        />
        <p className="muted">
          {s.emissions.length} emission{s.emissions.length === 1 ? '' : 's'}; newest EBC factor {fmt(s.emissions[0]?.ebcFactor, 3)}
        </p>
      </Card>
      <Card title="Memory" className="wide">
        <Memory stackId={s.id} sleeves={s.sleeves} onChange={q.reload} />
      </Card>
      <Card title="Anchors">
        <table className="list">
          <thead>
            <tr>
              <th>epoch</th>
              <th>crossRoot</th>
              <th>block</th>
              <th>Cortex</th>
            </tr>
          </thead>
          <tbody>
            {s.anchors.map((a: any) => (
              <tr key={a.epoch}>
                <td>{a.epoch}</td>
                <td>
                  <Hash value={a.crossRoot} />
                </td>
                <td>{a.blockHeight ?? '—'}</td>
                <td>
                  <span className={`pill ${a.chainStatus}`}>{a.chainStatus}</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {s.anchors.length === 0 ? <p className="muted">no anchors yet (they follow the epochs this stack writes memory in)</p> : null}
      </Card>
      <Card title="Residues" right={<a href="#/residues">board</a>}>
        <ul className="plain">
          {s.residues.map((r: any) => (
            <li key={r.id}>
              <span className={`pill ${r.status}`}>{r.status}</span> {r.kind} · {r.bounty} RT · <span className="muted">{r.trigger}</span>
            </li>
          ))}
        </ul>
        {s.residues.length === 0 ? <p className="muted">none</p> : null}
      </Card>
    </div>
  );
}

function Sleeves({ stack, limits, reload }: { stack: any; limits: { flag: number; desync: number }; reload: () => void }) {
  const [kind, setKind] = useState('ai');
  const a = useAction();
  const spawn = () =>
    a.run(
      () => gql('mutation($s: ID!, $k: String!) { spawnSleeve(stackId: $s, embodimentType: $k) { id } }', { s: stack.id, k: kind }, stack.id),
      () => reload(),
    );
  return (
    <>
      <table className="list sleeves" data-testid="sleeves">
        <thead>
          <tr>
            <th>sleeve</th>
            <th>kind</th>
            <th>tick</th>
            <th>state</th>
            <th style={{ width: '26%' }}>drift</th>
            <th>tokens</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {stack.sleeves.map((v: any) => (
            <SleeveRow key={v.id} v={v} stackId={stack.id} limits={limits} reload={reload} />
          ))}
        </tbody>
      </table>
      <div className="form">
        <select value={kind} onChange={(e) => setKind(e.target.value)} aria-label="sleeve kind">
          {['human', 'ai', 'mining', 'memory'].map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
        <button type="button" onClick={spawn} disabled={a.busy} data-testid="spawn">
          Spawn sleeve
        </button>
        <ErrorBox error={a.error} />
      </div>
    </>
  );
}

function SleeveRow({ v, stackId, limits, reload }: { v: any; stackId: string; limits: { flag: number; desync: number }; reload: () => void }) {
  const [text, setText] = useState('');
  const a = useAction();
  const act = (query: string, vars: Record<string, unknown>, msg?: (r: any) => string) =>
    a.run(
      () => gql(query, vars, stackId),
      (r) => {
        reload();
        return msg?.(r);
      },
    );
  const state = !v.alive ? 'decommissioned' : v.frozen ? 'frozen' : 'alive';
  return (
    <tr className={state}>
      <td>
        <Hash value={v.id} n={14} />
      </td>
      <td>{v.embodimentType}</td>
      <td>{v.tickRate ? `${v.tickRate / 1000} s` : 'event'}</td>
      <td>
        <span className={`pill ${state}`}>{state}</span>
      </td>
      <td>
        <DriftBar drift={v.drift} flag={limits.flag} desync={limits.desync} />
      </td>
      <td>
        <Tokens t={v.tokens} />
      </td>
      <td className="actions">
        {v.alive && !v.frozen ? (
          <>
            <input placeholder="perceive…" value={text} onChange={(e) => setText(e.target.value)} aria-label="perceive text" />
            <button
              type="button"
              disabled={!text || a.busy}
              onClick={() =>
                act('mutation($id: ID!, $t: String!) { perceive(sleeveId: $id, text: $t) { cid epoch } }', { id: v.id, t: text }, (r) => {
                  setText('');
                  return `wrote ${r.perceive.cid.slice(0, 20)}… at epoch ${r.perceive.epoch}`;
                })
              }
            >
              perceive
            </button>
            <button
              type="button"
              disabled={a.busy}
              onClick={() => act('mutation($id: ID!) { syncSleeve(id: $id) { epoch } }', { id: v.id }, (r) => `synced at epoch ${r.syncSleeve.epoch}`)}
            >
              sync
            </button>
            <button
              type="button"
              disabled={a.busy}
              className="danger"
              onClick={() => confirm(`Decommission ${v.id}?`) && act('mutation($id: ID!) { decommissionSleeve(id: $id) { id } }', { id: v.id })}
            >
              decommission
            </button>
          </>
        ) : null}
        {a.note ? <span className="note">{a.note}</span> : null}
        <ErrorBox error={a.error} />
      </td>
    </tr>
  );
}

function StackActions({ stack, reload }: { stack: any; reload: () => void }) {
  const a = useAction();
  return (
    <div className="form">
      <button
        type="button"
        disabled={a.busy}
        onClick={() =>
          a.run(
            () => gql('mutation($s: ID!) { faucetDrip(stackId: $s) { granted { compute } sleeves } }', { s: stack.id }, stack.id),
            (r) => {
              reload();
              return `dripped ${r.faucetDrip.granted.compute} of each core token to ${r.faucetDrip.sleeves.length || 'the pool of'} sleeve(s)`;
            },
          )
        }
        data-testid="drip"
      >
        Faucet drip
      </button>
      <button
        type="button"
        disabled={a.busy}
        onClick={() =>
          a.run(
            () => gql('mutation($s: ID!) { claimEmissions(stackId: $s) { claimable { compute memory sync routing } } }', { s: stack.id }, stack.id),
            (r) => {
              reload();
              return `claimed ${fmt(r.claimEmissions.claimable.compute, 1)} compute (and the other core tokens) into the pool`;
            },
          )
        }
        data-testid="claim"
      >
        Claim emissions
      </button>
      {a.note ? <span className="note">{a.note}</span> : null}
      <ErrorBox error={a.error} />
    </div>
  );
}
