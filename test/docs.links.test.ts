// README.md and docs/*.md link only to files inside the repository, and every such link resolves.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');
const files = [
  'README.md',
  ...fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('documentation links', () => {
  for (const file of files) {
    it(`${file} links only to files in the repository`, () => {
      const text = fs.readFileSync(path.join(root, file), 'utf8');
      const bad: string[] = [];
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split('#')[0]!;
        if (!target) continue; // an anchor in the same file
        if (/^[a-z]+:/i.test(target)) bad.push(`${target} (external)`);
        else {
          const resolved = path.resolve(path.dirname(path.join(root, file)), target);
          if (!resolved.startsWith(root + path.sep)) bad.push(`${target} (outside the repository)`);
          else if (!fs.existsSync(resolved)) bad.push(`${target} (missing)`);
        }
      }
      expect(bad).toEqual([]);
    });
  }
});
