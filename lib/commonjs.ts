// A package's exports from `import()`, whatever loaded it. A CommonJS package's namespace differs
// by loader: Node's has its exports as `default` (and the names it could find), the precompiled
// platform's bundle (bin/bundle.mjs) only as `default`, and tsx's interop only by name.

/** The module's exports: the namespace when it has `key` (an export the package has), else its `default`. */
export function commonJsExports<T extends object>(ns: T, key: keyof T): T {
  return key in ns ? ns : (ns as unknown as { default: T }).default;
}
