#!/usr/bin/env node
// Bootstrap for `npm start` and the `cog` CLI, in plain JavaScript so it runs on a fresh clone:
// installs dependencies when node_modules is missing or older than the lockfile, generates the
// Prisma client when the schema changed, builds the inspector (ui/dist) when its sources changed,
// then loads the CLI (bin/cog.ts): precompiled (bin/bundle.mjs), or through tsx.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import v8 from 'node:v8';

// PGlite's postgres and Prisma's query compiler are WebAssembly that every start compiles afresh.
// V8 sends each wasm function that has run past a small budget to its optimizing compiler, and
// PGlite's own startup runs enough of postgres to keep the helper threads compiling for seconds,
// on the same two cores as the main thread (perf during a restart: half the process's samples in
// TurboFan, `WasmCompilationUnit::ExecuteCompilation`). A budget 100 times the default keeps the
// startup on the baseline compiler; under load the hot functions still reach the optimizing one
// within seconds. bench/start.ts: restart 4.55 -> 3.71 s, its CPU 6.7 -> 4.8 s; the perceive bench
// unchanged. Set before any module is compiled; a budget given on the command line wins.
if (![...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) => a.includes('--wasm-tiering-budget')))
  v8.setFlagsFromString('--wasm-tiering-budget=180000000');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg) => process.stderr.write(`cog: ${msg}\n`);

function ensureInstalled() {
  const marker = path.join(root, 'node_modules', '.package-lock.json');
  const lock = path.join(root, 'package-lock.json');
  const stale = !fs.existsSync(marker) || (fs.existsSync(lock) && fs.statSync(lock).mtimeMs > fs.statSync(marker).mtimeMs + 1000);
  if (!stale) return;
  say('installing dependencies (npm ci) ...');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, [fs.existsSync(lock) ? 'ci' : 'install', '--no-audit', '--no-fund'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
}

export function ensureGenerated() {
  const schema = fs.readFileSync(path.join(root, 'prisma', 'schema.prisma'));
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', 'prisma', 'package.json'), 'utf8'));
  const hash = createHash('sha256').update(schema).update(pkg.version).digest('hex');
  const stamp = path.join(root, 'generated', '.schema-hash');
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === hash && fs.existsSync(path.join(root, 'generated', 'prisma', 'client.ts'))) return;
  say('generating the Prisma client ...');
  // `prisma generate` needs no schema engine, but the CLI looks for one: point it at any file so it
  // does not try to download it (this machine has no internet).
  execFileSync(process.execPath, [path.join(root, 'node_modules', 'prisma', 'build', 'index.js'), 'generate'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY || process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
  });
  fs.writeFileSync(stamp, hash);
}

/** The inspector's static build; a failed build is reported and the platform starts without /ui. */
async function ensureUi() {
  try {
    const { ensureUiBuilt } = await import(pathToFileURL(path.join(root, 'ui', 'build.mjs')).href);
    await ensureUiBuilt({ log: say });
  } catch (e) {
    say(`the inspector could not be built (GET /ui answers 503): ${e.message}`);
  }
}

const args = process.argv.slice(2);
// `npm ci` / `npm install` run `cog generate` as their postinstall step (package.json), so a fresh
// clone's first start finds everything built; there the install is under way (no second one),
// and a failure only warns: the next start builds what is missing.
const postinstall = process.env.npm_lifecycle_event === 'postinstall';
if (postinstall) {
  process.on('uncaughtException', (e) => {
    say(`generate after the install failed (the next start retries): ${e.message}`);
    process.exit(0);
  });
  process.on('unhandledRejection', (e) => {
    say(`generate after the install failed (the next start retries): ${e?.message ?? e}`);
    process.exit(0);
  });
} else ensureInstalled();
ensureGenerated();
if (args[0] === 'generate' || args[0] === 'start' || (args[0] === 'service' && args[1] === 'gateway') || args[0] === 'up') await ensureUi();
// Client commands (built on the SDK) load without the platform's own modules: a quick start.
const CLIENT = new Set(['stack', 'sleeve', 'perceive', 'remember', 'recall', 'needlecast', 'faucet', 'watch', 'status']);
// The platform runs precompiled (bin/bundle.mjs), built now when a source changed; COG_TSX=1, or a
// build that fails, loads the sources through tsx instead.
const { ensureBundle, buildBundle } = await import(pathToFileURL(path.join(root, 'bin', 'bundle.mjs')).href);
let bundle;
if (args[0] === 'generate') {
  try {
    bundle = await buildBundle();
  } catch (e) {
    say(`the platform could not be precompiled (cog start will load its sources through tsx): ${e.message}`);
  }
} else bundle = CLIENT.has(args[0]) || process.env.COG_TSX === '1' ? undefined : await ensureBundle({ log: say });
if (bundle) process.setSourceMapsEnabled(true);
else {
  const { register } = await import('tsx/esm/api');
  register();
}
/** A platform module by its source path: its precompiled entry, or the source through tsx. */
const platformModule = (rel) => import(pathToFileURL(bundle ? path.join(bundle, `${path.basename(rel, '.ts')}.mjs`) : path.join(root, rel)).href);
if (args[0] === 'generate') {
  // What a first start would otherwise make itself: the migrated PGlite template.
  await (await platformModule('bin/cog.ts')).generate();
  process.exit(0);
}
// Tracing must hook the modules before they load: the ESM hook for pg (imported by Prisma's
// adapter), then the provider and instrumentations (lib/tracing.ts), then the platform.
if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT && (args[0] === 'start' || args[0] === 'service')) {
  const { register: registerHook } = await import('node:module');
  registerHook('@opentelemetry/instrumentation/hook.mjs', pathToFileURL(path.join(root, 'package.json')), { data: { include: ['pg', 'pg-pool'] } });
  const { loadConfig } = await platformModule('lib/config.ts');
  let otel;
  try {
    otel = loadConfig().otel;
  } catch {
    // a bad variable: the CLI reports it when it loads the config
  }
  if (otel) {
    const { startTracing } = await platformModule('lib/tracing.ts');
    await startTracing({ endpoint: otel.endpoint, serviceName: otel.serviceName ?? (args[0] === 'service' ? `cog-${args[1]}` : 'cog') });
  }
}
if (CLIENT.has(args[0])) {
  const client = await import(pathToFileURL(path.join(root, 'bin', 'client.ts')).href);
  process.exitCode = await client.clientMain(args);
} else {
  const cli = await platformModule('bin/cog.ts');
  await cli.main(args);
}
