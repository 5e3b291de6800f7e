// The boundary rules of docs/layout.md, checked over the product tree's imports and table accesses:
// a context is entered only through its door (subgraphs/<context>/index.ts); the kernel knows no
// context; contexts know no face; arrows between contexts point down the layer order; a table is
// touched only by the context that owns it. Known debts are listed by name and must shrink: an
// entry that no longer applies fails too, so the list cannot go stale.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTEXTS, importsOf, isDoor, modelsTouchedBy, placeOf, prismaModels, productFiles, root, type Context, type Place } from '../helpers/boundaries.ts';

/** Lower contexts first: a context may import only contexts before it (docs/layout.md). */
export const LAYERS: Context[] = ['chains', 'economy', 'residues', 'stacks', 'sleeves', 'memory'];

/** Which place owns each Prisma model (docs/layout.md has the same table). */
export const OWNERS: Record<string, Place> = {
  Stack: 'ctx:stacks',
  Sleeve: 'ctx:sleeves',
  KeyLease: 'ctx:sleeves',
  Saga: 'ctx:sleeves',
  SleeveLease: 'ctx:sleeves',
  SleeveRuntimeBeat: 'ctx:sleeves',
  SleeveLeaseEnd: 'ctx:sleeves',
  MemoryNode: 'ctx:memory',
  MemoryBranch: 'ctx:memory',
  MemoryWriteEpoch: 'ctx:memory',
  LedgerEntry: 'ctx:economy',
  Balance: 'ctx:economy',
  Emission: 'ctx:economy',
  EmissionAccrual: 'ctx:economy',
  EmissionRun: 'ctx:economy',
  EmissionEpoch: 'ctx:economy',
  EmissionWatch: 'ctx:economy',
  EmissionCohort: 'ctx:economy',
  Residue: 'ctx:residues',
  PassRun: 'ctx:residues',
  MedullaBlock: 'ctx:chains',
  CoherenceSubmission: 'ctx:chains',
  EpochAnchor: 'ctx:chains',
  ChainOutbox: 'ctx:chains',
  ChainLedgerIntent: 'ctx:chains',
  EventOutbox: 'lib',
};

/** Upward arrows still in the tree ("from -> to": the files that make them). Remove entries as they go. */
const ARROW_DEBT: Record<string, string[]> = {};

/** Tables touched outside their owner ("file: Model"). Remove entries as they go. */
const TABLE_DEBT: string[] = [];

const rel = (f: string) => path.relative(root, f);
const files = productFiles();
const imports = files.flatMap(importsOf);
const ctxName = (p: Place) => (p.startsWith('ctx:') ? (p.slice(4) as Context) : null);

describe('boundaries (docs/layout.md)', () => {
  it('reads a product tree with six contexts, each with its door', () => {
    expect(files.length).toBeGreaterThan(100);
    for (const c of CONTEXTS) expect(files.map(rel)).toContain(`subgraphs/${c}/index.ts`);
    expect(imports.length).toBeGreaterThan(300);
  });

  it('enters a context only through its door', () => {
    const deep = imports.filter((i) => {
      const target = ctxName(placeOf(i.to));
      return target && placeOf(i.from) !== `ctx:${target}` && !isDoor(i.to, target);
    });
    expect(deep.map((i) => `${rel(i.from)} imports ${rel(i.to)}`)).toEqual([]);
  });

  it('keeps the kernel free of contexts and faces, and contexts free of faces', () => {
    const bad = imports.filter((i) => {
      const from = placeOf(i.from);
      const to = placeOf(i.to);
      if (from === 'lib') return to !== 'lib' && to !== 'other';
      if (from.startsWith('ctx:')) return ['router', 'compat-rest', 'mcp', 'bin', 'flows'].includes(to) || rel(i.to).startsWith('test/');
      return false;
    });
    expect(bad.map((i) => `${rel(i.from)} imports ${rel(i.to)}`)).toEqual([]);
  });

  it('leaves the choice of mode to assembly: no context or flow asks what runs in its process', () => {
    const asking = files.filter((f) => {
      const place = placeOf(f);
      return (place.startsWith('ctx:') || place === 'flows') && /\b(p|platform)\.local\.(has|get)\(/.test(fs.readFileSync(f, 'utf8'));
    });
    expect(asking.map(rel)).toEqual([
      // reconcile() over the Cortex service of this process (a maintenance call, not a request path).
      'subgraphs/chains/cortex/reconcile.ts',
    ]);
  });

  it('points arrows between contexts down the layers (no cycles), apart from the listed debts', () => {
    const arrows = new Map<string, Set<string>>();
    for (const i of imports) {
      const a = ctxName(placeOf(i.from));
      const b = ctxName(placeOf(i.to));
      if (!a || !b || a === b) continue;
      if (LAYERS.indexOf(a) > LAYERS.indexOf(b)) continue; // downward: allowed
      const key = `${a} -> ${b}`;
      if (!arrows.has(key)) arrows.set(key, new Set());
      arrows.get(key)!.add(rel(i.from));
    }
    const found = Object.fromEntries([...arrows].map(([k, v]) => [k, [...v].sort()]).sort());
    const debt = Object.fromEntries(
      Object.entries(ARROW_DEBT)
        .map(([k, v]) => [k, [...v].sort()])
        .sort(),
    );
    expect(found).toEqual(debt);
  });

  it('touches a table only from the context that owns it, apart from the listed debts', () => {
    const models = prismaModels();
    expect([...models.values()].sort()).toEqual(Object.keys(OWNERS).sort()); // every model has an owner
    const found: string[] = [];
    for (const f of files) for (const m of modelsTouchedBy(f, models)) if (OWNERS[m] !== placeOf(f)) found.push(`${rel(f)}: ${m}`);
    expect(found.sort()).toEqual([...TABLE_DEBT].sort());
  });
});
