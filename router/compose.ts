// `npm run compose`: composes the subgraphs listed in supergraph.yaml into supergraph.graphql with
// @apollo/composition. Composition errors fail it; `--check` fails when the file is stale.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'graphql';
import { composeServices } from '@apollo/composition';
import { readSupergraphConfig, supergraphFile } from './subgraphs.ts';

export { supergraphFile };

export function composeSupergraph(): string {
  const subgraphs = readSupergraphConfig();
  const result = composeServices(subgraphs.map((s) => ({ name: s.name, url: s.routingUrl, typeDefs: parse(s.sdl) })));
  if (result.errors?.length) {
    throw new Error('supergraph composition failed:\n' + result.errors.map((e) => `  - ${e.message}`).join('\n'));
  }
  return result.supergraphSdl! + '\n';
}

function main(): void {
  const sdl = composeSupergraph();
  if (process.argv.includes('--check')) {
    const current = fs.existsSync(supergraphFile) ? fs.readFileSync(supergraphFile, 'utf8') : '';
    if (current !== sdl) {
      console.error('supergraph.graphql is stale: run `npm run compose`');
      process.exit(1);
    }
    console.log('supergraph.graphql is current');
    return;
  }
  fs.writeFileSync(supergraphFile, sdl);
  console.log(`wrote ${path.relative(process.cwd(), supergraphFile)}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
