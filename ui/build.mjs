// Builds the inspector (ui/ -> ui/dist) with Vite when ui/dist is missing or was built from other
// sources: the stamp ui/dist/.build-hash hashes every source file under ui/ and the versions of the
// packages bundled. Used by bin/cog.mjs (npm start, cog generate) and `npm run build:ui`.
// Several processes may start at once on one clone (parallel test files): each builds into its own
// folder and renames it into place, so a reader never sees half a build.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ui = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(ui);
const dist = path.join(ui, 'dist');
const BUNDLED = ['vite', 'react', 'react-dom', 'graphql-ws', '@noble/ed25519', '@noble/hashes'];

function sources(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    if (e.name === 'dist' || e.name.startsWith('.dist-') || e.name.startsWith('dist.old-') || e.name === 'node_modules') continue;
    const f = path.join(dir, e.name);
    if (e.isDirectory()) sources(f, out);
    else out.push(f);
  }
  return out;
}

export function uiSourceHash() {
  const h = createHash('sha256');
  for (const f of sources(ui)) h.update(path.relative(ui, f)).update('\0').update(fs.readFileSync(f)).update('\0');
  for (const name of BUNDLED) {
    const pkg = path.join(root, 'node_modules', name, 'package.json');
    h.update(`${name}@${fs.existsSync(pkg) ? JSON.parse(fs.readFileSync(pkg, 'utf8')).version : '-'}\0`);
  }
  return h.digest('hex');
}

const stampOf = (dir) => {
  try {
    return fs.readFileSync(path.join(dir, '.build-hash'), 'utf8');
  } catch {
    return null;
  }
};

export const uiBuildCurrent = () => stampOf(dist) === uiSourceHash() && fs.existsSync(path.join(dist, 'index.html'));

/** Builds when stale; returns 'current', 'built' or 'unavailable' (vite not installed: production installs without dev dependencies). */
export async function ensureUiBuilt({ log = (m) => process.stderr.write(`cog: ${m}\n`), force = false } = {}) {
  const hash = uiSourceHash();
  if (!force && stampOf(dist) === hash && fs.existsSync(path.join(dist, 'index.html'))) return 'current';
  const vitePkg = path.join(root, 'node_modules', 'vite', 'package.json');
  if (!fs.existsSync(vitePkg)) {
    log('vite is not installed: the inspector at /ui is not built (npm install, then npm run build:ui)');
    return 'unavailable';
  }
  log('building the inspector (ui/ -> ui/dist) ...');
  const { build } = await import(pathToFileURL(path.join(root, 'node_modules', 'vite', 'dist', 'node', 'index.js')).href);
  const tmp = path.join(ui, `.dist-${process.pid}-${Date.now()}`);
  try {
    await build({ configFile: path.join(ui, 'vite.config.mjs'), logLevel: 'warn', build: { outDir: tmp, emptyOutDir: true } });
    fs.writeFileSync(path.join(tmp, '.build-hash'), hash);
    for (let i = 0; i < 5; i++) {
      if (stampOf(dist) === hash) return 'built'; // another process got there first
      const old = `${dist}.old-${process.pid}-${i}`;
      try {
        if (fs.existsSync(dist)) fs.renameSync(dist, old);
        fs.renameSync(tmp, dist);
        fs.rmSync(old, { recursive: true, force: true });
        return 'built';
      } catch (e) {
        if (!['ENOTEMPTY', 'EEXIST', 'ENOENT', 'EPERM'].includes(e.code)) throw e;
        fs.rmSync(old, { recursive: true, force: true });
      }
    }
    throw new Error('could not move the inspector build into ui/dist');
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = await ensureUiBuilt({ force: process.argv.includes('--force') });
  process.stderr.write(`inspector: ${r}\n`);
  if (r === 'unavailable') process.exit(1);
}
