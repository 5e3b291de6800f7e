import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import { composeSupergraph, supergraphFile } from '../../router/compose.ts';
import { readSupergraphConfig } from '../../router/subgraphs.ts';

describe('supergraph', () => {
  it('lists the six subgraphs in rover format', () => {
    expect(
      readSupergraphConfig()
        .map((s) => s.name)
        .sort(),
    ).toEqual(['chains', 'economy', 'memory', 'residues', 'sleeves', 'stacks']);
  });
  it('the checked-in supergraph.graphql is current (run `npm run compose`)', () => {
    expect(fs.readFileSync(supergraphFile, 'utf8')).toBe(composeSupergraph());
  });
});
