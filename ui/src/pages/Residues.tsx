import { useState } from 'react';
import { Card, ErrorBox, Hash, useAction, useEpoch } from '../components.tsx';
import { gql } from '../gql.ts';
import { href, useLive, useQuery } from '../hooks.ts';

const KINDS = ['stale-ordering', 'speculative-divergence', 'historical-non-canonical', 'reorg-orphan', 'shard-loss', 'routing-equivocation'];
const STATUSES = ['open', 'claimed', 'resolved', 'expired'];
const FIELDS = 'id kind trigger bounty status stackId sleeveId epoch openedAt expiresAtEpoch claimant proof';
const BOARD = `query($kind: String) { residues(first: 50, kind: $kind) { ${FIELDS} } ${STATUSES.map((s) => `${s}: residueCount(status: "${s}", kind: $kind)`).join(' ')} }`;
const SUB = `subscription($after: String) { residueChanged(after: $after) { cursor residueId status residue { ${FIELDS} } } }`;

interface Residue {
  id: string;
  kind: string;
  trigger: string;
  bounty: number;
  status: string;
  stackId: string | null;
  sleeveId: string | null;
  epoch: number;
  openedAt: string;
  expiresAtEpoch: number;
  claimant: string | null;
  proof: unknown;
}

export function Residues() {
  const [kind, setKind] = useState<string | null>(null);
  const q = useQuery(BOARD, { kind }, [kind]);
  const [live, setLive] = useState<Map<string, Residue>>(new Map());
  const [selected, setSelected] = useState<string>();
  // Opened, claimed, resolved and expired residues arrive as they change; counts follow.
  useLive<{ cursor: string; residueId: string; residue: Residue | null }>(
    SUB,
    {},
    'residueChanged',
    (e) => {
      if (e.residue) setLive((m) => new Map(m).set(e.residue!.id, e.residue!));
      q.reload();
    },
    [],
  );
  const byId = new Map<string, Residue>();
  for (const r of q.data?.residues ?? []) byId.set(r.id, r);
  for (const r of live.values()) if (!kind || r.kind === kind) byId.set(r.id, r);
  const all = [...byId.values()].sort((a, b) => b.openedAt.localeCompare(a.openedAt));
  const sel = selected ? byId.get(selected) : undefined;
  return (
    <div className="grid" data-testid="page-residues">
      <Card title="Residues" className="wide" right={<span className="muted">newest 50 {kind ?? 'of every kind'}, live</span>}>
        <div className="chips">
          <button type="button" className={!kind ? 'on' : ''} onClick={() => setKind(null)}>
            all kinds
          </button>
          {KINDS.map((k) => (
            <button type="button" key={k} className={kind === k ? 'on' : ''} onClick={() => setKind(k)}>
              {k}
            </button>
          ))}
        </div>
        <ErrorBox error={q.error} />
        <div className="board" data-testid="residue-board">
          {STATUSES.map((st) => (
            <div key={st} className="column" data-status={st}>
              <h3>
                {st} <span className="muted">{q.data?.[st] ?? '…'}</span>
              </h3>
              {all
                .filter((r) => r.status === st || (st === 'open' && r.status === 'detected'))
                .map((r) => (
                  <button
                    type="button"
                    key={r.id}
                    className={`residue ${selected === r.id ? 'sel' : ''}`}
                    onClick={() => setSelected(r.id)}
                    data-testid="residue"
                    data-kind={r.kind}
                  >
                    <b>{r.kind}</b> <span className="bounty">{r.bounty} RT</span>
                    <span className="muted">{r.trigger}</span>
                    <span className="muted">
                      epoch {r.epoch}
                      {r.claimant ? ` · claimed by ${r.claimant.slice(0, 18)}…` : ''}
                    </span>
                  </button>
                ))}
            </div>
          ))}
        </div>
      </Card>
      {sel ? <ResidueDetail r={sel} onDone={q.reload} /> : null}
    </div>
  );
}

function ResidueDetail({ r, onDone }: { r: Residue; onDone: () => void }) {
  const { epoch } = useEpoch();
  const [claimant, setClaimant] = useState(r.stackId ?? '');
  const [proof, setProof] = useState('{}');
  const a = useAction();
  const claim = () =>
    a.run(
      async () => {
        let p: unknown;
        try {
          p = JSON.parse(proof);
        } catch {
          throw new Error('proof is not JSON');
        }
        return gql(
          `mutation($id: ID!, $c: ID!, $p: JSON) { submitResidueProof(id: $id, claimant: $c, proof: $p) { id status claimant } }`,
          { id: r.id, c: claimant, p },
          claimant,
        );
      },
      (x) => {
        onDone();
        return `status ${x.submitResidueProof.status}`;
      },
    );
  return (
    <Card
      title={
        <>
          {r.kind} <span className="muted">{r.bounty} RT</span>
        </>
      }
      className="wide"
    >
      <dl className="facts">
        <dt>id</dt>
        <dd>
          <code>{r.id}</code>
        </dd>
        <dt>status</dt>
        <dd>
          <span className={`pill ${r.status}`}>{r.status}</span>
          {r.status === 'open' ? (
            <span className="muted">
              {' '}
              expires at epoch {r.expiresAtEpoch} (now {epoch ?? '…'})
            </span>
          ) : null}
        </dd>
        <dt>trigger</dt>
        <dd>{r.trigger}</dd>
        <dt>stack</dt>
        <dd>{r.stackId ? <a href={href('stacks', r.stackId)}>{r.stackId}</a> : '—'}</dd>
        <dt>sleeve</dt>
        <dd>
          <Hash value={r.sleeveId} n={16} />
        </dd>
        <dt>opened</dt>
        <dd>
          epoch {r.epoch}, {new Date(r.openedAt).toLocaleString()}
        </dd>
        <dt>claimant</dt>
        <dd>{r.claimant ? <a href={href('stacks', r.claimant)}>{r.claimant}</a> : '—'}</dd>
        <dt>proof</dt>
        <dd>{r.proof ? <pre className="json">{JSON.stringify(r.proof, null, 2)}</pre> : '—'}</dd>
      </dl>
      {r.status === 'open' ? (
        <div className="form">
          <input placeholder="claimant stack id" value={claimant} onChange={(e) => setClaimant(e.target.value)} style={{ width: 320 }} aria-label="claimant" />
          <textarea value={proof} onChange={(e) => setProof(e.target.value)} rows={3} cols={50} aria-label="proof JSON" />
          <button type="button" disabled={a.busy || !claimant} onClick={claim}>
            Submit proof
          </button>
          {a.note ? <span className="note">{a.note}</span> : null}
          <ErrorBox error={a.error} />
        </div>
      ) : null}
    </Card>
  );
}
