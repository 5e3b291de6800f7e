// The precompiled platform: the project's TypeScript (bin/cog.ts and everything it imports, the
// workspace SDK included) and the packages it uses, but for those EXTERNAL names (below), bundled
// by esbuild into generated/platform/<build>/, so `cog start` and `cog service` load a few large
// files of plain JavaScript instead of going through tsx's loader hooks for each module (the hooks
// run on a separate thread: a message round trip per import, and a transform per file) and finding
// and reading some 1,800 package files.
// Built by `cog generate` and, when a source changed, by the next start (about four seconds);
// generated/platform/current.json names the build and the project's inputs it was built from, with
// their hash, so a start re-hashes those files (a few ms) to know the build is current; the hash
// also covers the installed packages (node_modules/.package-lock.json).
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
  // The packages are bundled too: a build is stale once the installed tree changes (npm writes it
  // there; a lockfile newer than it is installed by bin/cog.mjs before the build is looked at).
  try {
    h.update(fs.readFileSync(path.join(root, 'node_modules', '.package-lock.json')));
  } catch {
    h.update('no-lock');
  }
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

// Packages stay in node_modules, loaded by Node at run time, only for a reason; the rest are bundled
// with the project's code. Loading them from node_modules was about 1,200 CommonJS and 600 ES module
// files at each start, and half of the start's module-loading time was finding and reading them
// (resolution, stat, package.json reads, the CommonJS export scan an ES import of one needs), not
// running them: bundled, every service's modules load in about half the time (docs/benchmarks.md).
// A name ending in '/' is a scope, one ending in '*' a prefix.
export const EXTERNAL = [
  // loads its WebAssembly and data files from beside its own modules
  '@electric-sql/pglite',
  'pglite-prisma-adapter',
  // the query compiler's WebAssembly, and the generated client's runtime
  '@prisma/',
  // tracing hooks their loading (bin/cog.mjs registers the hook for pg and pg-pool)
  'pg',
  'pg-pool',
  // tracing's SDK, exporters and instrumentations (which hook module loading), loaded only with
  // tracing on; the gateway's unused telemetry packages are stand-ins in Node's module cache
  // (router/deferred-deps.ts), as are @apollo/composition and make-fetch-happen. The API (a process-wide registry) is
  // bundled.
  '@opentelemetry/sdk-*',
  '@opentelemetry/exporter-*',
  '@opentelemetry/instrumentation*',
  '@opentelemetry/resource-detector-*',
  '@fastify/otel',
  '@apollo/composition',
  'make-fetch-happen',
  // transports run files of its own in worker threads
  'pino',
  'thread-stream',
  // finds its binary beside its module
  '@foundry-rs/anvil',
  'esbuild',
];
const packageOf = (spec) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
export const isExternal = (spec) => {
  const pkg = packageOf(spec);
  return EXTERNAL.some((e) => (e.endsWith('/') ? pkg.startsWith(e) : e.endsWith('*') ? pkg.startsWith(e.slice(0, -1)) : pkg === e));
};
const modulesDir = `${path.join(root, 'node_modules')}${path.sep}`;
// A bundled CommonJS file's __dirname / __filename would be the bundle's globals (the generated
// Prisma client even sets globalThis.__dirname), so each file that uses them unassigned gets its own
// path as literals, as Node's module wrapper would give it.
const usesDirname = /(?<![.\w$])__(dirname|filename)(?![\w$])/;
const declaresDirname = /\b(?:var|let|const)\s+__(?:dirname|filename)\b|function[\w\s$]*\([^)]*\b__(?:dirname|filename)\b/;

/**
 * The generated Prisma client's query compiler is WebAssembly that the client imports as a base64
 * string: a 4.6 MB module that each start read, decoded to a string and parsed (about 120 ms of a
 * restart's main thread on a 2-core VM) before decoding the string (another 20 ms). The bundle
 * writes the decoded bytes into its folder (COMPILER_WASM_FILE) and the client reads that file.
 * A generated client whose text differs from this keeps its own way (test/foundation/bundle.test.ts
 * checks that the bundle has the file).
 */
const COMPILER_WASM_LOAD =
  /getQueryCompilerWasmModule: async \(\) => \{\s*const \{ wasm \} = await import\((["'])(@prisma\/client\/runtime\/[\w.-]+\.wasm-base64\.mjs)\1\)\s*return await decodeBase64AsWasm\(wasm\)\s*\}/;
export const COMPILER_WASM_FILE = 'prisma-query-compiler.wasm';
const generatedClientClass = path.join(root, 'generated', 'prisma', 'internal', 'class.ts');

/**
 * The bundle's resolution: packages bundled but for EXTERNAL; each file's own paths as literals.
 * `compiler.spec` is set to the query compiler's base64 module when the client is made to read
 * `compiler.file` instead.
 */
const bundlePlugin = (compiler) => ({
  name: 'cog-bundle',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return undefined;
      if (!isExternal(args.path)) return undefined;
      // An external stays a bare name when Node, resolving it from the bundle's folder, finds the
      // package its importer would have (hoisted to the top of node_modules); a copy nested under
      // the importing package is required by the path Node resolves from that importer.
      if (args.kind !== 'require-call' || !args.importer.startsWith(modulesDir)) return { path: args.path, external: true };
      let resolved;
      try {
        resolved = createRequire(args.importer).resolve(args.path);
      } catch {
        return { path: args.path, external: true };
      }
      const hoisted = resolved.startsWith(path.join(modulesDir, packageOf(args.path)) + path.sep);
      return { path: hoisted ? args.path : resolved, external: true };
    });
    b.onLoad({ filter: /\.(ts|mts|mjs|js|cjs)$/ }, async (args) => {
      let src = await fs.promises.readFile(args.path, 'utf8');
      if (args.path === generatedClientClass)
        src = src.replace(COMPILER_WASM_LOAD, (_m, _q, spec) => {
          compiler.spec = spec;
          // Compiled off the main thread (WebAssembly.compile): `new WebAssembly.Module` held it
          // 35 ms at each start for the 3.4 MB module, while the other core was idle.
          return `getQueryCompilerWasmModule: async () => WebAssembly.compile(await (await import('node:fs/promises')).readFile(${JSON.stringify(compiler.file)}))`;
        });
      return { contents: moduleSource(args.path, src), loader: /\.m?ts$/.test(args.path) ? 'ts' : 'js' };
    });
  },
});

/** A module's source as the bundle takes it: its own import.meta and, for a package's file, __dirname / __filename as literals. */
export function moduleSource(file, src) {
  if (src.includes('import.meta'))
    src = src
      .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(file).href))
      .replaceAll('import.meta.dirname', JSON.stringify(path.dirname(file)))
      .replaceAll('import.meta.filename', JSON.stringify(file));
  if (file.startsWith(modulesDir) && usesDirname.test(src) && !declaresDirname.test(src))
    src = src.replace(new RegExp(usesDirname.source, 'g'), (_m, which) => JSON.stringify(which === 'dirname' ? path.dirname(file) : file));
  return src;
}

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

/** esbuild's `keepNames` helper, as it writes it into the bundle. */
const NAME_HELPER = '__name=(target,value)=>__defProp(target,"name",{value,configurable:!0})';
/** The same, skipping a function whose name is already the one kept. */
export const NAME_HELPER_CHECKED = '__name=(target,value)=>target.name===value?target:__defProp(target,"name",{value,configurable:!0})';

/**
 * `keepNames` wraps every named function and class the bundle creates, closures included, in
 * `__name`, which redefines its `name`: about 0.5 µs a closure, 4.7% of the gateway's thread
 * answering GET /healthz (the framework's hooks make several closures a request) and 1.7% under
 * the perceive bench. Almost always the name is already the one kept (esbuild renames only on a
 * collision, and JavaScript names a function after what it is assigned to), and reading it costs a
 * third of redefining it. The attributes of `name` are the same either way. Throws when the helper
 * is not found (a new esbuild writes it differently): the build then loads the sources through tsx
 * (ensureBundle), and test/foundation/bundle.test.ts fails.
 */
function cheaperNames(dir) {
  let found = 0;
  for (const f of fs.readdirSync(dir)) {
    if (!f.endsWith('.mjs')) continue;
    const file = path.join(dir, f);
    const text = fs.readFileSync(file, 'utf8');
    if (!text.includes(NAME_HELPER)) continue;
    found++;
    fs.writeFileSync(file, text.replace(NAME_HELPER, NAME_HELPER_CHECKED));
  }
  if (!found) throw new Error("bundle: esbuild's __name helper not found (its text changed): update NAME_HELPER in bin/bundle.mjs");
}

/** Builds the bundle; returns its folder. */
export async function buildBundle() {
  const esbuild = await import(pathToFileURL(esbuildPath()).href);
  const tools = toolHash();
  const name = `b-${Date.now().toString(36)}-${process.pid}`;
  const dir = path.join(out, name);
  fs.mkdirSync(out, { recursive: true });
  const compiler = { file: path.join(dir, COMPILER_WASM_FILE), spec: undefined };
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
    // Whitespace and syntax minified, names kept (stack frames and profiles name every function, and
    // the maps point at the sources): 13.3 -> 9.1 MB of modules, and V8 reads every byte of a
    // module it loads; six alternating restarts 2.67 s (CPU 3.58 s) against 2.76 s (3.67 s).
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: 'linked',
    // The packages' own sources left out of the maps: a quarter of their size, and Node reads a
    // chunk's map as it loads it (source maps are on); stack frames still name each package file.
    sourcesContent: false,
    metafile: true,
    logLevel: 'silent',
    plugins: [bundlePlugin(compiler)],
    // Bundled CommonJS packages require the externals and Node's own modules through `require`.
    banner: { js: "import { createRequire as __cogCreateRequire } from 'node:module'; const require = __cogCreateRequire(import.meta.url);" },
  });
  cheaperNames(dir);
  if (compiler.spec) {
    const { wasm } = await import(pathToFileURL(createRequire(path.join(root, 'package.json')).resolve(compiler.spec)).href);
    fs.writeFileSync(compiler.file, Buffer.from(wasm, 'base64'));
  }
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
