// The generated sides are current: sdk/schema.graphql (the supergraph's API schema plus the
// router's subscriptions) and the typed documents match what codegen makes from the checked-in
// supergraph.graphql and operations.graphql now, and the REST types what openapi-typescript makes
// from the checked-in openapi.json. Run `npm run sdk:codegen` when this fails.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildSchema, parse, validate } from 'graphql';
import { generate, REST_FILE, SCHEMA_FILE, TYPES_FILE } from '../scripts/codegen.ts';
import { buildSubscriptionSchema } from '../../router/subscriptions.ts';

describe('sdk codegen', () => {
  it('checked-in schema.graphql, generated/graphql.ts and generated/rest.ts are current', async () => {
    const { schema, types, rest } = await generate();
    expect(fs.readFileSync(REST_FILE, 'utf8'), 'sdk/src/generated/rest.ts is stale (openapi.json changed): run npm run sdk:codegen').toBe(rest);
    expect(fs.readFileSync(SCHEMA_FILE, 'utf8'), 'sdk/schema.graphql is stale: run npm run sdk:codegen').toBe(schema);
    expect(fs.readFileSync(TYPES_FILE, 'utf8'), 'sdk/src/generated/graphql.ts is stale: run npm run sdk:codegen').toBe(types);
  }, 60_000);

  it('every SDK operation validates against the schema the router serves', () => {
    const ops = parse(fs.readFileSync(new URL('../src/graphql/operations.graphql', import.meta.url), 'utf8'));
    const schema = buildSchema(fs.readFileSync(SCHEMA_FILE, 'utf8'));
    expect(validate(schema, ops).map((e) => e.message)).toEqual([]);
    // The subscription type the SDK was generated from is the router's own.
    const routerSchema = buildSubscriptionSchema(fs.readFileSync(SCHEMA_FILE, 'utf8').replace(/^#.*\n/, ''), {} as never, () => ({}) as never);
    expect(Object.keys(routerSchema.getSubscriptionType()!.getFields()).sort()).toEqual(Object.keys(schema.getSubscriptionType()!.getFields()).sort());
  });
});
