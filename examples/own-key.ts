// A Shape B stack whose key never leaves the client: generate an ed25519 key pair here, register
// the public key with a CPV, and sign with the private key. Then a sleeve with its own tick rate
// and the Shape B balance sheet (raw, effective after CPV and EBC decay).
//   npx tsx examples/own-key.ts
import { createClient, generateKeyPair } from '@cog/sdk/node';

const url = process.env.COG_URL ?? 'http://127.0.0.1:7070';
const { pubkey, identityPriv } = generateKeyPair();
const anon = createClient({ url });
const { stack } = await anon.stacks.create({ pubkey, cpv: { syncCoeff: 1, memoryCoeff: 1.5, computeCoeff: 0.5, residueCoeff: 1, routingCoeff: 1 } });
console.log(`stack ${stack.id}, pubkey ${stack.pubKey}`);

const cog = anon.withKey({ stackId: stack.id, identityPriv });
const sleeve = await cog.sleeves.spawn({ stackId: stack.id, kind: 'memory', tickRate: 4000 });
console.log(`sleeve ${sleeve.id} ticks every ${sleeve.tickRate} ms`);
await cog.memory.remember({ sleeveId: sleeve.id, text: 'kept for good', pin: true });

const sheet = await cog.economy.balances(stack.id);
console.log(`memory raw ${sheet.raw.memory}, effective ${sheet.effective.memory.toFixed(2)} (cpv ${sheet.cpv.memoryCoeff}, EBC ${sheet.ebcFactor.toFixed(3)})`);
const epoch = await cog.chains.epoch();
console.log(`epoch ${epoch.epoch}, tip ${epoch.tip.slice(0, 16)}…`);
await anon.close();
