// The precompiled platform: the project's TypeScript (bin/cog.ts and everything it imports, the
// workspace SDK included; packages stay external and load from node_modules as they are) bundled
// by esbuild into generated/platform/<build>/, so `cog start` and `cog service` load plain
// JavaScript instead of going through tsx's loader hooks for each module (the hooks run on a
// separate thread: a message round trip per import, and a transform per file).
// Built by `cog generate` and, when a source changed, by the next start (about half a second);
// generated/platform/current.json names the build and the inputs it was built from, with their
// hash, so a start re-hashes those files (a few ms) to know the build is current.
// Each file's import.meta.url / dirname / filename is its source's, so paths resolved from a
// module (migrations, contract artifacts, the miner worker, ui/dist) are the same as under tsx.
// Several processes may start at once on one clone: each builds into its own folder and the
// stamp is replaced by a rename, so a reader never sees half a build; a build a running process
// may still import from is kept a day.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'generated', 'platform');
const stampFile = path.join(out, 'current.json');
/** Entry points; splitting keeps one instance of each module across them. */
const ENTRIES = ['bin/cog.ts', 'lib/config.ts', 'lib/tracing.ts'];
const KEEP_MS = 24 * 3600 * 1000;

function esbuildPath() {
  // esbuild comes with tsx (a dependency); resolved from there, as tsx itself would load it.
  const req = createRequire(createRequire(path.join(root, 'package.json')).resolve('tsx/package.json'));
  return req.resolve('esbuild');
}

function toolHash() {
  const h = createHash('sha256');
  h.update(fs.readFileSync(fileURLToPath(import.meta.url)));
  h.update(fs.readFileSync(path.join(root, 'tsconfig.json')));
  h.update(process.versions.node.split('.')[0]);
  try {
    h.update(JSON.parse(fs.readFileSync(path.join(path.dirname(esbuildPath()), '..', 'package.json'), 'utf8')).version);
  } catch {
    h.update('no-esbuild');
  }
  return h.digest('hex');
}

/** Hash of the tools and of each input file's path and content; undefined when an input is gone. */
function inputsHash(inputs, tools = toolHash()) {
  const h = createHash('sha256').update(tools);
  for (const rel of inputs) {
    let body;
    try {
      body = fs.readFileSync(path.join(root, rel));
    } catch {
      return undefined;
    }
    h.update(rel).update('\0').update(body).update('\0');
  }
  return h.digest('hex');
}

function readStamp() {
  try {
    return JSON.parse(fs.readFileSync(stampFile, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The current build's folder, or undefined when there is none or a source changed since. */
export function currentBundle() {
  const stamp = readStamp();
  if (!stamp?.dir || !Array.isArray(stamp.inputs)) return undefined;
  const dir = path.join(out, stamp.dir);
  if (!fs.existsSync(path.join(dir, 'cog.mjs'))) return undefined;
  return inputsHash(stamp.inputs) === stamp.hash ? dir : undefined;
}

/** Each project file's own import.meta.url / dirname / filename, as literals. */
const importMetaPlugin = {
  name: 'cog-import-meta',
  setup(b) {
    // Bare specifiers are packages, loaded from node_modules at run time; the workspace SDK is
    // TypeScript and is bundled.
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path === '@cog/sdk' || args.path.startsWith('@cog/sdk/') ? undefined : { path: args.path, external: true },
    );
    b.onLoad({ filter: /\.(ts|mts|mjs|js)$/ }, async (args) => {
      const src = await fs.promises.readFile(args.path, 'utf8');
      const contents = src.includes('import.meta')
        ? src
            .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
            .replaceAll('import.meta.dirname', JSON.stringify(path.dirname(args.path)))
            .replaceAll('import.meta.filename', JSON.stringify(args.path))
        : src;
      return { contents, loader: /\.m?ts$/.test(args.path) ? 'ts' : 'js' };
    });
  },
};

function prune(keep) {
  const now = Date.now();
  for (const e of fs.readdirSync(out, { withFileTypes: true })) {
    if (!e.isDirectory() || e.name === keep) continue;
    const dir = path.join(out, e.name);
    try {
      if (now - fs.statSync(dir).mtimeMs > KEEP_MS) fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // another process pruned it
    }
  }
}

/** Builds the bundle; returns its folder. */
export async function buildBundle() {
  const esbuild = await import(pathToFileURL(esbuildPath()).href);
  const tools = toolHash();
  const name = `b-${Date.now().toString(36)}-${process.pid}`;
  const dir = path.join(out, name);
  fs.mkdirSync(out, { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: ENTRIES.map((e) => path.join(root, e)),
    entryNames: '[name]',
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    keepNames: true,
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'silent',
    plugins: [importMetaPlugin],
  });
  const inputs = Object.keys(result.metafile.inputs)
    .map((f) => path.relative(root, path.resolve(root, f)))
    .filter((f) => !f.startsWith('..') && !f.includes('node_modules'))
    .sort();
  const hash = inputsHash(inputs, tools);
  const tmp = `${stampFile}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify({ dir: name, hash, builtAt: new Date().toISOString(), inputs }, null, 1)}\n`);
  fs.renameSync(tmp, stampFile);
  prune(name);
  return dir;
}

/**
 * The folder of a current build, built first when stale; undefined when it cannot be built
 * (esbuild missing, a build error): the caller then loads the sources through tsx.
 */
export async function ensureBundle({ log = (m) => process.stderr.write(`cog: ${m}\n`) } = {}) {
  const dir = currentBundle();
  if (dir) return dir;
  try {
    return await buildBundle();
  } catch (e) {
    log(`the platform could not be precompiled, loading its sources through tsx: ${String(e.message ?? e).split('\n')[0]}`);
    return undefined;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const t0 = Date.now();
  const dir = await buildBundle();
  process.stderr.write(`platform bundle: ${path.relative(root, dir)} (${Date.now() - t0} ms)\n`);
}
