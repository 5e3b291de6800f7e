// The stacks, sleeves and memory subgraphs' mutations run the same domain calls as REST.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graphql, type GraphQLSchema } from 'graphql';
import { buildSubgraph, readSupergraphConfig } from '../router/subgraphs.ts';
import { newContext } from '../lib/graphql.ts';
import { memoryTestApp, type MemoryTestApp } from './helpers/memory-app.ts';

let t: MemoryTestApp;
const schemas = new Map<string, GraphQLSchema>();
beforeAll(async () => {
  t = await memoryTestApp();
  for (const cfg of readSupergraphConfig().filter((c) => ['stacks', 'sleeves', 'memory'].includes(c.name))) schemas.set(cfg.name, await buildSubgraph(cfg));
});
afterAll(async () => t?.close());

const run = async (subgraph: string, source: string, variableValues?: Record<string, unknown>) =>
  graphql({ schema: schemas.get(subgraph)!, source, variableValues, contextValue: newContext(t.p) });

describe('graphql mutations', () => {
  it('createStack, spawnSleeve, perceive, recall, syncSleeve, decommissionSleeve', async () => {
    const c = await run('stacks', 'mutation { createStack(name: "gql") { identityPriv stack { id tokenId pubKey cpv { syncCoeff } } } }');
    expect(c.errors).toBeUndefined();
    const stack = (c.data as any).createStack.stack;
    expect((c.data as any).createStack.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    const s = await run('sleeves', 'mutation($s: ID!) { spawnSleeve(stackId: $s, embodimentType: "ai") { id alive drift } }', { s: stack.id });
    const sleeve = (s.data as any).spawnSleeve;
    expect(sleeve).toMatchObject({ alive: true, drift: 0 });
    const p = await run('memory', 'mutation($id: ID!) { perceive(sleeveId: $id, text: "via graphql") { cid epoch thought } }', { id: sleeve.id });
    expect((p.data as any).perceive.thought).toBe(`ai@${sleeve.id.slice(-6)} via graphql`);
    const r = await run('memory', 'mutation($s: ID!) { recall(stackId: $s, depth: 5) { fragments { text } broken fidelity cost { memory } } }', {
      s: stack.id,
    });
    expect((r.data as any).recall).toEqual({ fragments: [{ text: 'via graphql' }], broken: [], fidelity: 1, cost: { memory: 1 } });
    const sy = await run('sleeves', 'mutation($id: ID!) { syncSleeve(id: $id) { ok epoch } }', { id: sleeve.id });
    expect((sy.data as any).syncSleeve.ok).toBe(true);
    const d = await run('sleeves', 'mutation($id: ID!) { decommissionSleeve(id: $id) { alive } }', { id: sleeve.id });
    expect((d.data as any).decommissionSleeve.alive).toBe(false);
    const again = await run('memory', 'mutation($id: ID!) { perceive(sleeveId: $id, text: "x") { cid } }', { id: sleeve.id });
    expect(again.errors?.[0].extensions?.code).toBe('SLEEVE_DECOMMISSIONED');
    const bad = await run('stacks', 'mutation { createStack(name: "") { identityPriv } }');
    expect(bad.errors?.[0].extensions?.code).toBe('BAD_REQUEST');
  });
});
