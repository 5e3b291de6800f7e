import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import './style.css';
import { EpochContext } from './components.tsx';
import { gql, linkState, onLinkState, type LinkState } from './gql.ts';
import { useLive, useRoute } from './hooks.ts';
import { Overview } from './pages/Overview.tsx';
import { Stacks } from './pages/Stacks.tsx';
import { StackPage } from './pages/Stack.tsx';
import { Residues } from './pages/Residues.tsx';
import { Needlecast } from './pages/Needlecast.tsx';
import { Keys } from './pages/Keys.tsx';

const NAV = [
  ['', 'Overview'],
  ['stacks', 'Stacks'],
  ['residues', 'Residues'],
  ['needlecast', 'Needlecast'],
  ['keys', 'Keys'],
] as const;

function App() {
  const { parts, params } = useRoute();
  const [epoch, setEpoch] = useState<{ epoch: number | null; height: number | null; tip: string | null; cursor: string | null }>({
    epoch: null,
    height: null,
    tip: null,
    cursor: null,
  });
  const [link, setLink] = useState<LinkState>(linkState());
  useEffect(() => onLinkState(setLink), []);
  useEffect(() => {
    gql('{ currentEpoch { epoch height tip } }')
      .then((d) => setEpoch((e) => (e.epoch === null ? { ...d.currentEpoch, cursor: null } : e)))
      .catch(() => {});
  }, []);
  useLive<{ cursor: string; epoch: number; height: number; tip: string }>(
    'subscription($after: String) { epochAdvanced(after: $after) { cursor epoch height tip } }',
    {},
    'epochAdvanced',
    (e) => setEpoch((cur) => (cur.epoch !== null && e.epoch < cur.epoch ? cur : { epoch: e.epoch, height: e.height, tip: e.tip, cursor: e.cursor })),
    [],
  );
  const page = parts[0] ?? '';
  let body: React.ReactNode;
  if (page === '') body = <Overview />;
  else if (page === 'stacks' && parts[1]) body = <StackPage id={parts[1]} />;
  else if (page === 'stacks') body = <Stacks />;
  else if (page === 'residues') body = <Residues />;
  else if (page === 'needlecast') body = <Needlecast sagaId={parts[1]} params={params} />;
  else if (page === 'keys') body = <Keys />;
  else
    body = (
      <p>
        Nothing at #{parts.join('/')}. <a href="#/">Overview</a>
      </p>
    );
  return (
    <EpochContext.Provider value={epoch}>
      <nav className="top">
        <span className="brand">◈ Cognitive Agent Platform</span>
        {NAV.map(([p, label]) => (
          <a key={p} href={`#/${p}`} className={page === p ? 'active' : ''}>
            {label}
          </a>
        ))}
        <span className="spacer" />
        <span className="epoch-badge" data-testid="nav-epoch">
          epoch {epoch.epoch ?? '…'}
        </span>
        <span className={`link ${link}`} data-testid="link-state" title="graphql-ws subscription link">
          {link}
        </span>
      </nav>
      <main>{body}</main>
    </EpochContext.Provider>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
