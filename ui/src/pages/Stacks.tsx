import { useEffect, useState } from 'react';
import { Card, ErrorBox, Hash, useAction } from '../components.tsx';
import { gql } from '../gql.ts';
import { href, useQuery } from '../hooks.ts';
import { addKey } from '../sign.ts';

const PAGE = 25;
const LIST = /* GraphQL */ `query($search: String, $first: Int!, $offset: Int!) {
  stackPage(search: $search, first: $first, offset: $offset) {
    total
    stacks { id tokenId name kind epoch chainStatus createdAt sleeves { id alive } }
  }
}`;

export function Stacks() {
  const [input, setInput] = useState('');
  const [search, setSearch] = useState('');
  const [offset, setOffset] = useState(0);
  useEffect(() => {
    const t = setTimeout(() => {
      setSearch(input.trim());
      setOffset(0);
    }, 250);
    return () => clearTimeout(t);
  }, [input]);
  const q = useQuery(LIST, { search: search || null, first: PAGE, offset }, [search, offset]);
  const page = q.data?.stackPage;
  const total = page?.total ?? 0;
  return (
    <div className="grid" data-testid="page-stacks">
      <Card
        title="Stacks"
        className="wide"
        right={
          <span className="muted" data-testid="stacks-total">
            {page ? `${total} stack${total === 1 ? '' : 's'}` : '…'}
          </span>
        }
      >
        <div className="toolbar">
          <input
            type="search"
            placeholder="Search id, name, kind or token id"
            value={input}
            onChange={(e) => setInput(e.target.value)}
            data-testid="stack-search"
            aria-label="search stacks"
          />
          <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
            ‹ newer
          </button>
          <span className="muted">{total ? `${offset + 1}–${Math.min(total, offset + PAGE)} of ${total}` : ''}</span>
          <button type="button" disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)} data-testid="stacks-next">
            older ›
          </button>
          {/* No subscription announces new stacks: the list is read again on request. */}
          <button type="button" onClick={() => q.reload()} disabled={q.loading} title="read the list again">
            refresh
          </button>
        </div>
        <ErrorBox error={q.error} />
        <table className="list" data-testid="stacks-table">
          <thead>
            <tr>
              <th>token</th>
              <th>name</th>
              <th>kind</th>
              <th>id</th>
              <th>epoch</th>
              <th>sleeves</th>
              <th>NFT</th>
              <th>created</th>
            </tr>
          </thead>
          <tbody>
            {(page?.stacks ?? []).map((s: any) => (
              <tr key={s.id}>
                <td>#{s.tokenId}</td>
                <td>
                  <a href={href('stacks', s.id)}>{s.name || <span className="muted">(unnamed)</span>}</a>
                </td>
                <td>{s.kind}</td>
                <td>
                  <Hash value={s.id} n={14} />
                </td>
                <td>{s.epoch}</td>
                <td>
                  {s.sleeves.filter((x: any) => x.alive).length} / {s.sleeves.length}
                </td>
                <td>
                  <span className={`pill ${s.chainStatus}`}>{s.chainStatus}</span>
                </td>
                <td className="muted">{new Date(s.createdAt).toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
      <CreateStack onCreated={() => q.reload()} />
    </div>
  );
}

function CreateStack({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [kind, setKind] = useState('human');
  const [made, setMade] = useState<{ id: string; identityPriv: string | null }>();
  const a = useAction();
  const create = () =>
    a.run(
      () => gql('mutation($input: CreateStackInput!) { createStack(input: $input) { identityPriv stack { id } } }', { input: { name, kind } }),
      (r) => {
        const id = r.createStack.stack.id as string;
        // The key came to this page from the API; it stays here (memory only) so the page can sign.
        if (r.createStack.identityPriv) addKey(id, r.createStack.identityPriv);
        setMade({ id, identityPriv: r.createStack.identityPriv });
        onCreated();
      },
    );
  return (
    <Card title="Create a stack">
      <div className="form">
        <input placeholder="name" value={name} onChange={(e) => setName(e.target.value)} data-testid="create-name" />
        <select value={kind} onChange={(e) => setKind(e.target.value)}>
          {['human', 'ai', 'mining', 'memory'].map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
        <button type="button" disabled={!name || a.busy} onClick={create} data-testid="create-stack">
          Create
        </button>
      </div>
      <ErrorBox error={a.error} />
      {made ? (
        <p className="note">
          Created <a href={href('stacks', made.id)}>{made.id}</a>.{' '}
          {made.identityPriv ? 'Its key is held by this page (until reload) for signing; copy it from the creation response if you need it elsewhere.' : ''}
        </p>
      ) : null}
    </Card>
  );
}
