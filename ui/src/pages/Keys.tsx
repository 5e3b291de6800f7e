import { useEffect, useState } from 'react';
import { Card, ErrorBox, useAction } from '../components.tsx';
import { gql } from '../gql.ts';
import { href } from '../hooks.ts';
import { HEX64, addKey, forgetKey, keyStacks, onKeysChanged, publicKeyOf } from '../sign.ts';

/**
 * Keys for COG_AUTH=required: a stack's identityPriv, pasted here, signs that stack's writes in this
 * page (lib/sign.ts's scheme). It is checked against the stack's public key, kept in memory only,
 * and sent nowhere: only signatures leave the page.
 */
export function Keys() {
  const [stackId, setStackId] = useState('');
  const [seed, setSeed] = useState('');
  const [list, setList] = useState(keyStacks());
  useEffect(() => onKeysChanged(() => setList(keyStacks())), []);
  const a = useAction();
  const add = () =>
    a.run(
      async () => {
        const s = seed.trim().toLowerCase();
        if (!HEX64.test(s)) throw new Error('the key must be 64 hex characters (the identityPriv of the creation response)');
        const d = await gql('query($id: ID!) { stack(id: $id) { pubKey } }', { id: stackId.trim() });
        if (!d.stack) throw new Error(`no stack ${stackId}`);
        if (publicKeyOf(s) !== d.stack.pubKey) throw new Error("that key is not this stack's key (its public key differs)");
        addKey(stackId.trim(), s);
        setSeed('');
        return 'key held for signing';
      },
      (m) => m,
    );
  return (
    <div className="grid" data-testid="page-keys">
      <Card title="Signing keys" className="wide">
        <p className="muted">
          With <code>COG_AUTH=required</code> every stack-scoped write must be signed by the stack's ed25519 key. Paste it here: it is checked against the
          stack's public key, held in this page's memory only (a reload forgets it), and never sent — only signatures are.
        </p>
        <div className="form">
          <input placeholder="stack id" value={stackId} onChange={(e) => setStackId(e.target.value)} style={{ width: 340 }} data-testid="key-stack" />
          <input
            placeholder="identityPriv (64 hex)"
            type="password"
            autoComplete="off"
            value={seed}
            onChange={(e) => setSeed(e.target.value)}
            style={{ width: 340 }}
            data-testid="key-seed"
          />
          <button type="button" disabled={a.busy || !stackId || !seed} onClick={add} data-testid="key-add">
            Hold key
          </button>
          {a.note ? <span className="note">{a.note}</span> : null}
        </div>
        <ErrorBox error={a.error} />
        <ul className="plain" data-testid="keys">
          {list.map((id) => (
            <li key={id}>
              <a href={href('stacks', id)}>{id}</a>{' '}
              <button type="button" onClick={() => forgetKey(id)}>
                forget
              </button>
            </li>
          ))}
          {list.length === 0 ? <li className="muted">no keys held</li> : null}
        </ul>
      </Card>
    </div>
  );
}
