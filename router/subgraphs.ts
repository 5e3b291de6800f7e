// The six subgraphs as executable schemas (@apollo/subgraph, Federation 2), read from
// supergraph.yaml so the router, `npm run compose` and `cog service subgraph-<name>` agree.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { parse, type GraphQLSchema } from 'graphql';
import { buildSubgraphSchema } from '@apollo/subgraph';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The composed supergraph (checked in; `npm run compose` writes it, the gateway reads it). */
export const supergraphFile = path.join(root, 'supergraph.graphql');

export interface SubgraphConfig {
  name: string;
  routingUrl: string;
  schemaFile: string;
  sdl: string;
}

export function readSupergraphConfig(file = path.join(root, 'supergraph.yaml')): SubgraphConfig[] {
  const doc = parseYaml(fs.readFileSync(file, 'utf8')) as { subgraphs: Record<string, { routing_url: string; schema: { file: string } }> };
  return Object.entries(doc.subgraphs).map(([name, s]) => {
    const schemaFile = path.resolve(root, s.schema.file);
    return { name, routingUrl: s.routing_url, schemaFile, sdl: fs.readFileSync(schemaFile, 'utf8') };
  });
}

const resolverModules: Record<string, () => Promise<{ resolvers: Record<string, unknown> }>> = {
  stacks: async () => ({ resolvers: await (await import('../subgraphs/stacks/index.ts')).loadResolvers() }),
  sleeves: async () => ({ resolvers: await (await import('../subgraphs/sleeves/index.ts')).loadResolvers() }),
  memory: async () => ({ resolvers: await (await import('../subgraphs/memory/index.ts')).loadResolvers() }),
  chains: async () => ({ resolvers: await (await import('../subgraphs/chains/index.ts')).loadResolvers() }),
  economy: async () => ({ resolvers: await (await import('../subgraphs/economy/index.ts')).loadResolvers() }),
  residues: async () => ({ resolvers: await (await import('../subgraphs/residues/index.ts')).loadResolvers() }),
};

export async function buildSubgraph(cfg: SubgraphConfig): Promise<GraphQLSchema> {
  const load = resolverModules[cfg.name];
  if (!load) throw new Error(`no resolvers registered for subgraph ${cfg.name}`);
  const { resolvers } = await load();
  // Fields whose answer spans contexts come from the flows above them, merged type by type.
  const { flowResolvers } = await import('../flows/graphql.ts');
  const merged: Record<string, unknown> = { ...resolvers };
  for (const [type, fields] of Object.entries(flowResolvers[cfg.name] ?? {})) {
    merged[type] = { ...((merged[type] as Record<string, unknown> | undefined) ?? {}), ...fields };
  }
  return buildSubgraphSchema([{ typeDefs: parse(cfg.sdl), resolvers: merged as never }]);
}
