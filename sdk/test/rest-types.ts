// Compile-time checks of the typed REST client (npm run typecheck): wrong paths, missing params
// and wrong bodies do not compile.
import type { CogClient } from '../src/index.ts';

export async function restTypeChecks(cog: CogClient) {
  const stack = await cog.rest.get('/v1/stacks/{id}', { params: { id: 'stack:ai:1:000000000000' } });
  const name: string = stack.name;
  const p = await cog.rest.post('/v1/sleeves/{id}/perceive', { params: { id: 'sleeve:ai:1:00000000' }, body: { input: 'hi' } });
  const cid: string = p.cid;
  const list = await cog.rest.get('/v1/stacks');
  const epoch = await cog.rest.get('/v1/epochs/current');
  const e: number = epoch.epoch;
  // @ts-expect-error not a route of the document
  await cog.rest.get('/v1/nope');
  // @ts-expect-error params are required
  await cog.rest.get('/v1/stacks/{id}');
  // @ts-expect-error perceive takes {input: string}
  await cog.rest.post('/v1/sleeves/{id}/perceive', { params: { id: 'x' }, body: { input: 1 } });
  return { name, cid, list, e };
}
