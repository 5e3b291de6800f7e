// The /v1/events bus stream for REST clients: every event of one stack, resumed with `since`
// after a dropped connection, so none is lost or repeated. Prints the first COUNT events (default
// 3) of a stack it makes and writes to, then the `since` to resume from later.
//   npx tsx examples/watch-events.ts
import { createClient } from '@cog/sdk/node';

const url = process.env.COG_URL ?? 'http://127.0.0.1:7070';
const count = Number(process.env.COUNT ?? 3);
const anon = createClient({ url });
const { stack, key } = await anon.stacks.create({ name: 'events-example' });
console.log(`stack ${stack.id}`);
const cog = anon.withKey(key!);
const sleeve = await cog.sleeves.spawn({ stackId: stack.id, kind: 'ai' });

const stream = cog.events({ subjects: [`cog.perceive.${stack.id}`, `cog.sleeve.*.${stack.id}`] });
const reading = (async () => {
  let n = 0;
  for await (const e of stream) {
    console.log(`${e.seq} ${e.subject} ${JSON.stringify(e.data).slice(0, 100)}`);
    if (++n >= count) break;
  }
})();
await new Promise((r) => setTimeout(r, 800));
for (let i = 0; i < count; i++) await cog.memory.perceive({ sleeveId: sleeve.id, text: `event ${i}` });
await reading;
console.log(`resume later with since=${stream.since}`);
await stream.close();
