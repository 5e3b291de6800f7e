// Compiles the Cortex suite with solc-js (pinned in package.json) into contracts/build/*.json, so
// start-up needs no compiler. build/manifest.json holds the hash of every input (sources, the
// OpenZeppelin files they import, compiler version, settings); `--check` exits 1 when stale.
//   npx tsx contracts/compile.ts [--check]
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
export const CONTRACTS_DIR = path.dirname(fileURLToPath(import.meta.url));
export const BUILD_DIR = path.join(CONTRACTS_DIR, 'build');
const ROOT = path.resolve(CONTRACTS_DIR, '..');

/** The suite (the seven contracts of the spec and the ERC-8004 Validation Registry) plus the ERC-20 that BandwidthToken creates. */
export const SUITE = [
  'StackIdentity',
  'BandwidthToken',
  'QuellistTreasury',
  'NeedlecastRouter',
  'SleeveRegistry',
  'ResidueRegistry',
  'EpochAnchor',
  'ValidationRegistry',
] as const;
export type SuiteName = (typeof SUITE)[number];
const EXTRA = ['CortexToken'];

// paris: no PUSH0/MCOPY, so the same bytecode runs on geth and Besu Clique networks.
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'paris',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
};

function resolveImport(p: string): string {
  if (p.startsWith('@')) return path.join(ROOT, 'node_modules', p);
  return path.join(CONTRACTS_DIR, p);
}

/** Every source file reachable from contracts/*.sol, by import path, read from disk. */
export function collectSources(): Record<string, { content: string }> {
  const sources: Record<string, { content: string }> = {};
  const queue = fs
    .readdirSync(CONTRACTS_DIR)
    .filter((f) => f.endsWith('.sol'))
    .sort();
  const importRe = /import\s+(?:\{[^}]*\}\s+from\s+)?"([^"]+)"/g;
  while (queue.length) {
    const id = queue.shift()!;
    if (sources[id]) continue;
    const content = fs.readFileSync(resolveImport(id), 'utf8');
    sources[id] = { content };
    for (const m of content.matchAll(importRe)) {
      const dep = m[1].startsWith('.') ? path.posix.normalize(path.posix.join(path.posix.dirname(id), m[1])) : m[1];
      if (!sources[dep]) queue.push(dep);
    }
  }
  return sources;
}

export function solcVersion(): string {
  return (require('solc') as { version(): string }).version();
}

/** Hash over everything that determines the artifacts. */
export function inputHash(sources = collectSources()): string {
  const h = createHash('sha256').update(solcVersion()).update(JSON.stringify(SETTINGS));
  for (const id of Object.keys(sources).sort()) h.update(id).update('\0').update(sources[id].content).update('\0');
  return h.digest('hex');
}

export function compile(): { written: string[]; hash: string } {
  const solc = require('solc') as { compile(input: string): string };
  const sources = collectSources();
  const out = JSON.parse(solc.compile(JSON.stringify({ language: 'Solidity', sources, settings: SETTINGS }))) as {
    errors?: { severity: string; formattedMessage: string }[];
    contracts: Record<string, Record<string, { abi: unknown[]; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  fs.mkdirSync(BUILD_DIR, { recursive: true });
  const written: string[] = [];
  for (const name of [...SUITE, ...EXTRA]) {
    const file = Object.keys(out.contracts).find((f) => out.contracts[f][name] && !f.startsWith('@'));
    if (!file) throw new Error(`contract ${name} not found in the output`);
    const c = out.contracts[file][name];
    const artifact = { contractName: name, sourceName: file, abi: c.abi, bytecode: '0x' + c.evm.bytecode.object };
    fs.writeFileSync(path.join(BUILD_DIR, `${name}.json`), JSON.stringify(artifact, null, 2) + '\n');
    written.push(name);
  }
  const hash = inputHash(sources);
  fs.writeFileSync(
    path.join(BUILD_DIR, 'manifest.json'),
    JSON.stringify({ compiler: solcVersion(), settings: SETTINGS, inputHash: hash, contracts: written }, null, 2) + '\n',
  );
  return { written, hash };
}

/** True when build/manifest.json matches the current sources. */
export function artifactsCurrent(): boolean {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(BUILD_DIR, 'manifest.json'), 'utf8')) as { inputHash: string };
    return m.inputHash === inputHash();
  } catch {
    return false;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--check')) {
    const ok = artifactsCurrent();
    console.log(ok ? 'contracts/build is current' : 'contracts/build is stale: run npx tsx contracts/compile.ts');
    process.exit(ok ? 0 : 1);
  }
  const t = Date.now();
  const { written, hash } = compile();
  console.log(`compiled ${written.join(', ')} (${Date.now() - t} ms), inputHash ${hash.slice(0, 12)}`);
}
