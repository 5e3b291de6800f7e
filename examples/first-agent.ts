// A first agent, end to end (docs/getting-started.md walks through it): create a stack and keep
// its key, spawn two sleeves, watch `perceived` live, perceive, recall, drip from the faucet,
// and needlecast to another sleeve kind. Works with signing on (COG_AUTH=required).
//   npx tsx examples/first-agent.ts            (COG_URL: the gateway, default http://127.0.0.1:7070)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient, CogError } from '@cog/sdk/node';

const url = process.env.COG_URL ?? 'http://127.0.0.1:7070';
const anon = createClient({ url });

// 1. A stack: the platform makes its ed25519 key and shows identityPriv once. Keep it.
const { stack, key } = await anon.stacks.create({ name: 'first-agent', kind: 'ai' });
// Into the same key directory the cog CLI uses (COG_KEYS_DIR), or a fresh private folder.
const keyDir = process.env.COG_KEYS_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'cog-key-'));
fs.mkdirSync(keyDir, { recursive: true, mode: 0o700 });
const keyFile = path.join(keyDir, `${stack.id.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
fs.writeFileSync(keyFile, JSON.stringify(key), { mode: 0o600 });
console.log(`stack ${stack.id} (key kept in ${keyFile})`);

// Every write from here on is signed with the stack's key.
const cog = anon.withKey(key!);

// 2. Two sleeves: a human interface and an AI engine, bound to the same stack.
const human = await cog.sleeves.spawn({ stackId: stack.id, kind: 'human', hostname: 'laptop' });
const ai = await cog.sleeves.spawn({ stackId: stack.id, kind: 'ai' });
console.log(`sleeves ${human.id}, ${ai.id}`);

// 3. Watch `perceived` live: an async iterator that resumes by itself after a dropped connection.
const live = cog.subscribe('perceived', { stackId: stack.id });
const seen: string[] = [];
const watching = (async () => {
  for await (const e of live) {
    console.log(`  live: ${e.sleeveId} wrote ${e.cid} (cursor ${e.cursor})`);
    seen.push(e.cid);
    if (seen.length === 2) break;
  }
})();
await new Promise((r) => setTimeout(r, 1000)); // let the subscription open before writing

// 4. Perceive through each sleeve: encrypted under the epoch's key, linked to the episodic head.
const a = await cog.memory.perceive({ sleeveId: human.id, text: 'The user prefers short answers.' });
const b = await cog.memory.perceive({ sleeveId: ai.id, text: 'Plan: summarise the report, then ask.' });
console.log(`perceived ${a.cid} and ${b.cid}`);
await watching;

// 5. Recall: newest first, decrypted, with its fidelity.
const recall = await cog.memory.recall({ stackId: stack.id, depth: 5 });
for (const f of recall.fragments) console.log(`  recall @${f.epoch}: ${f.text}`);
console.log(`fidelity ${recall.fidelity}`);

// 6. Drip development tokens from the faucet (once a minute per stack).
const grant = await cog.economy.faucet(stack.id);
console.log(`faucet: +${grant.granted.routing} routing over ${grant.sleeves.length} sleeves`);

// 7. Needlecast the AI sleeve's running state into a new memory sleeve, a line per saga step.
const result = await cog.needlecast.run({ from: ai.id, to: 'memory' }, (s) => console.log(`  needlecast ${s.step}: ${s.status}`));
console.log(`needlecast ${result.sagaId}: ${result.status}, now on ${result.to}`);

// Problems are typed: code, status, detail (and the field for bad input).
try {
  await cog.memory.perceive({ sleeveId: ai.id, text: 'the old sleeve is gone' });
} catch (e) {
  if (!(e instanceof CogError)) throw e;
  console.log(`as expected: ${e.code} (${e.status}): ${e.detail}`);
}

await cog.close();
await anon.close();
if (seen.length !== 2 || result.status !== 'completed') process.exit(1);
