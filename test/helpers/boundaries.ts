// Reads the product tree's import graph and its table accesses, for the boundary rules
// (test/foundation/boundaries.test.ts) and for anyone who wants to draw them.
import fs from 'node:fs';
import path from 'node:path';

export const root = path.resolve(import.meta.dirname, '../..');
export const CONTEXTS = ['stacks', 'sleeves', 'memory', 'chains', 'economy', 'residues'] as const;
export type Context = (typeof CONTEXTS)[number];
/** Where a product file sits: a context, or one of the layers around them. */
export type Place = `ctx:${Context}` | 'lib' | 'flows' | 'router' | 'compat-rest' | 'mcp' | 'bin' | 'other';

const PRODUCT_DIRS = ['lib', 'subgraphs', 'flows', 'router', 'compat-rest', 'mcp', 'bin'];

export function productFiles(): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return;
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|mts|mjs)$/.test(e.name) && !/\.test\.ts$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
    }
  };
  for (const d of PRODUCT_DIRS) walk(path.join(root, d));
  return out.sort();
}

export function placeOf(file: string): Place {
  const [top, second] = path.relative(root, file).split(path.sep);
  if (top === 'subgraphs' && (CONTEXTS as readonly string[]).includes(second)) return `ctx:${second as Context}`;
  if (['lib', 'flows', 'router', 'compat-rest', 'mcp', 'bin'].includes(top)) return top as Place;
  return 'other';
}

export interface Import {
  from: string;
  to: string;
  /** The specifier as written. */
  spec: string;
}

/** Every relative import (static, re-export, dynamic) of a file, resolved to a path. */
export function importsOf(file: string): Import[] {
  const src = fs
    .readFileSync(file, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
  const out: Import[] = [];
  const re = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)'(\.{1,2}\/[^']+)'/gm;
  for (const m of src.matchAll(re)) out.push({ from: file, to: path.resolve(path.dirname(file), m[1]), spec: m[1] });
  return out;
}

export const isDoor = (file: string, ctx: Context) => file === path.join(root, 'subgraphs', ctx, 'index.ts');

/** The Prisma models (delegate name -> model name) read from the schema. */
export function prismaModels(): Map<string, string> {
  const schema = fs.readFileSync(path.join(root, 'prisma', 'schema.prisma'), 'utf8');
  const models = [...schema.matchAll(/^model\s+(\w+)\s*\{/gm)].map((m) => m[1]);
  return new Map(models.map((m) => [m[0].toLowerCase() + m.slice(1), m]));
}

/** The models a file touches: through a Prisma delegate (`x.sleeve.update`) or by name in SQL (`"Sleeve"`). */
export function modelsTouchedBy(file: string, models = prismaModels()): Set<string> {
  const src = fs.readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '');
  const out = new Set<string>();
  for (const [delegate, model] of models) {
    const viaClient = new RegExp(`\\.${delegate}\\s*\\.\\s*(?:find\\w*|create\\w*|update\\w*|delete\\w*|upsert|count|aggregate|groupBy)\\b`);
    const viaSql = new RegExp(`"${model}"`);
    if (viaClient.test(src) || viaSql.test(src)) out.add(model);
  }
  return out;
}
