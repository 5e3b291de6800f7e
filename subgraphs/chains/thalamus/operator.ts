// The Thalamus operator's ed25519 key: THALAMUS_OPERATOR_KEY (64 hex seed, validated by
// lib/config.ts), or a key file under the data dir created once with mode 0600. The seed never leaves this module except to sign.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../../../lib/config.ts';
import { generateIdentity, isHex, publicKeyFromSeed, sign } from '../../../lib/crypto.ts';
import { tupleMessage, type CoherenceTuple } from './coherence.ts';

export interface Operator {
  pubKey: string;
  signTuple(t: CoherenceTuple): string;
}

function operatorFromSeed(seed: string): Operator {
  const pubKey = publicKeyFromSeed(seed);
  return { pubKey, signTuple: (t) => sign(tupleMessage(t), seed) };
}

export function loadOperator(dataDir: string, configuredSeed?: string): Operator {
  if (configuredSeed) return operatorFromSeed(configuredSeed.toLowerCase());
  const file = path.join(dataDir, 'thalamus.key');
  if (fs.existsSync(file)) {
    const seed = fs.readFileSync(file, 'utf8').trim();
    if (!isHex(seed, 32)) throw new ConfigError('THALAMUS_OPERATOR_KEY', `${file} does not hold a 64 hex seed`);
    return operatorFromSeed(seed.toLowerCase());
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const { identityPriv } = generateIdentity();
  fs.writeFileSync(file, identityPriv + '\n', { mode: 0o600 });
  return operatorFromSeed(identityPriv);
}
