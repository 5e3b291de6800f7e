// The precompiled platform (bin/bundle.mjs): the packages are bundled with the project's code but
// for the few it names, each bundled package file keeps its own paths, and the gateway's CommonJS
// packages are read alike from Node, from the bundle and through tsx. That the bundle runs is shown
// by every test that starts `bin/cog.mjs` (test/e2e/start.test.ts and others).
import fs from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { init as lexerReady, parse as parseImports } from 'es-module-lexer';
import { commonJsExports } from '../../lib/commonjs.ts';

const root = path.resolve(import.meta.dirname, '../..');
interface BundleModule {
  ensureBundle(o?: { log?: (m: string) => void }): Promise<string | undefined>;
  isExternal(spec: string): boolean;
  moduleSource(file: string, src: string): string;
  NAME_HELPER_CHECKED: string;
  COMPILER_WASM_FILE: string;
}
const bundle = (): Promise<BundleModule> => import(path.join(root, 'bin', 'bundle.mjs')) as Promise<BundleModule>;
const builtins = new Set(builtinModules);

describe('the precompiled platform', () => {
  it('bundles the packages, and loads from node_modules only those it names', async () => {
    const { ensureBundle, isExternal } = await bundle();
    const dir = await ensureBundle({ log: (m) => expect.fail(m) });
    expect(dir).toBeDefined();
    await lexerReady;
    const files = fs.readdirSync(dir!).filter((f) => f.endsWith('.mjs'));
    const bare = new Set<string>();
    const byPath = new Set<string>();
    let bundledGraphql = false;
    for (const f of files) {
      const src = fs.readFileSync(path.join(dir!, f), 'utf8');
      // (the bundle is minified: its modules are known by its source maps)
      const map = path.join(dir!, `${f}.map`);
      if (
        fs.existsSync(map) &&
        (JSON.parse(fs.readFileSync(map, 'utf8')) as { sources: string[] }).sources.some((x) => x.endsWith('node_modules/graphql/execution/execute.js'))
      )
        bundledGraphql = true;
      const specs = [
        // the module's imports, static and dynamic, read by a lexer (the bundle is minified, and its
        // strings hold import statements of their own: the SDK's error text)
        ...parseImports(src)[0].flatMap((i) => (i.n ? [[i.n, i.n]] : [])),
        // (not in a string: ajv writes `require("ajv/dist/runtime/...")` into its standalone code)
        ...src.matchAll(/(?<!['"`])\b(?:__require|require|import)\(\s*"([^"]+)"\s*\)/g),
      ];
      for (const m of specs) {
        const spec = m[1]!;
        if (spec.startsWith('.') || spec.startsWith('node:') || builtins.has(spec)) continue;
        (path.isAbsolute(spec) ? byPath : bare).add(spec);
      }
    }
    expect(bundledGraphql).toBe(true);
    // What is still loaded from node_modules is what bin/bundle.mjs names, and some of it is; any
    // other name left is one no package here provides (an optional peer, required in a try).
    const installed = (s: string) => {
      try {
        createRequire(path.join(root, 'package.json')).resolve(s);
        return true;
      } catch {
        return false;
      }
    };
    expect([...bare].filter((s) => !isExternal(s) && installed(s))).toEqual([]);
    expect([...bare]).toContain('@electric-sql/pglite');
    // A copy nested under the package that requires it is loaded by its path, as Node would find it.
    for (const p of byPath) {
      expect(fs.existsSync(p), p).toBe(true);
      expect(p.split(`${path.sep}node_modules${path.sep}`).length, p).toBeGreaterThan(2);
    }
    // No package file is left reading the bundle's own __dirname / __filename.
    for (const f of files) {
      const src = fs.readFileSync(path.join(dir!, f), 'utf8');
      expect(src.match(/(?<![.\w$"'])__(?:dirname|filename)(?![\w$"'])/g), f).toBeNull();
    }
  });

  it("reads Prisma's query compiler from a WebAssembly file of its own, not the client's 4.6 MB base64 module", async () => {
    const { ensureBundle, COMPILER_WASM_FILE } = await bundle();
    const dir = (await ensureBundle({ log: (m) => expect.fail(m) }))!;
    const wasm = path.join(dir, COMPILER_WASM_FILE);
    expect(WebAssembly.validate(fs.readFileSync(wasm))).toBe(true);
    const srcs = fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.mjs'))
      .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));
    expect(srcs.filter((s) => s.includes('wasm-base64'))).toEqual([]);
    expect(srcs.filter((s) => s.includes(JSON.stringify(wasm)))).toHaveLength(1);
    // The generated client the bundle was built from loads the same bytes its own way.
    const compilerModule: string = '@prisma/client/runtime/query_compiler_fast_bg.postgresql.wasm-base64.mjs';
    const { wasm: base64 } = (await import(compilerModule)) as { wasm: string };
    expect(Buffer.from(base64, 'base64').equals(fs.readFileSync(wasm))).toBe(true);
  });

  it("keeps names through esbuild's helper, which redefines a name only when it differs", async () => {
    const { ensureBundle, NAME_HELPER_CHECKED } = await bundle();
    const dir = await ensureBundle({ log: (m) => expect.fail(m) });
    // Every definition of the helper (the bundle is minified: one declaration among others).
    const helpers = fs
      .readdirSync(dir!)
      .filter((f) => f.endsWith('.mjs'))
      .flatMap((f) => {
        const src = fs.readFileSync(path.join(dir!, f), 'utf8');
        return [...src.matchAll(/__name=\(target,value\)=>/g)].map((m) => src.slice(m.index, m.index + NAME_HELPER_CHECKED.length));
      });
    expect(helpers.length).toBeGreaterThan(0);
    expect(new Set(helpers)).toEqual(new Set([NAME_HELPER_CHECKED]));
    const __name = new Function('__defProp', `var ${NAME_HELPER_CHECKED}; return __name;`)(Object.defineProperty) as <T>(t: T, v: string) => T;
    // A function esbuild renamed (a collision) gets its own name back, as with esbuild's helper.
    const renamed = __name(function cluster2() {}, 'cluster');
    expect(renamed.name).toBe('cluster');
    const attributes = { writable: false, enumerable: false, configurable: true };
    expect(Object.getOwnPropertyDescriptor(renamed, 'name')).toEqual({ value: 'cluster', ...attributes });
    // One already named so is returned as it is, with the same attributes.
    const next = function next() {};
    expect(__name(next, 'next')).toBe(next);
    expect(Object.getOwnPropertyDescriptor(next, 'name')).toEqual({ value: 'next', ...attributes });
    // A function whose `name` is not a string (a class's static method) gets the string, as esbuild's own helper gives it.
    const named = { name: () => 'method' }.name;
    const withMethod = Object.defineProperty(function f() {}, 'name', { value: named, configurable: true });
    expect(__name(withMethod, 'Named').name).toBe('Named');
  });

  it('gives a package file its own __dirname and __filename, and a project file its own import.meta', async () => {
    const { moduleSource } = await bundle();
    const file = path.join(root, 'node_modules', 'some-package', 'lib', 'index.js');
    const dirname = JSON.stringify(path.dirname(file));
    expect(moduleSource(file, '"use strict";\nconst p = require("path").join(__dirname, "..", "package.json");\nmodule.exports = __filename;')).toBe(
      `"use strict";\nconst p = require("path").join(${dirname}, "..", "package.json");\nmodule.exports = ${JSON.stringify(file)};`,
    );
    // a property of that name, and typeof checks, stay sound
    expect(moduleSource(file, 'x.__dirname = typeof __dirname;')).toBe(`x.__dirname = typeof ${dirname};`);
    // a file that declares its own is left as it is
    const own = 'const __dirname = path.dirname(fileURLToPath(import.meta.url)); use(__dirname);';
    expect(moduleSource(file, own)).toBe(own.replace('import.meta.url', JSON.stringify(`file://${file}`)));
    const wrapped = 'module.exports = function (module, exports, __dirname) { return __dirname; };';
    expect(moduleSource(file, wrapped)).toBe(wrapped);
    // the project's own files: import.meta as literals, __dirname untouched (they do not use it)
    const mine = path.join(root, 'lib', 'x.ts');
    expect(moduleSource(mine, 'const u = import.meta.url, d = import.meta.dirname; __dirname;')).toBe(
      `const u = ${JSON.stringify(`file://${mine}`)}, d = ${JSON.stringify(path.dirname(mine))}; __dirname;`,
    );
  });
});

describe('commonJsExports', () => {
  class Gateway {}
  const exports = { ApolloGateway: Gateway, other: 1 };
  it("reads a CommonJS package's exports from Node's namespace, the bundle's and tsx's alike", () => {
    expect(commonJsExports({ default: exports, ApolloGateway: Gateway } as never, 'ApolloGateway' as never)).toMatchObject({ ApolloGateway: Gateway });
    expect(commonJsExports({ default: exports } as never, 'ApolloGateway' as never)).toBe(exports);
    expect(commonJsExports(exports, 'ApolloGateway')).toBe(exports);
  });
  it('reads @apollo/gateway as the router does', async () => {
    const { ApolloGateway } = commonJsExports(await import('@apollo/gateway'), 'ApolloGateway');
    expect(typeof ApolloGateway).toBe('function');
  });
});
