// Renders a Clique genesis (chain id 131072, period 4) for one or more signers and a funded operator:
//   npx tsx deploy/cortex/genesis.ts geth|besu <operatorAddress> <signerAddress> [<signerAddress> ...] > genesis.json
// extradata = 32 vanity bytes || signer addresses (20 bytes each, sorted) || 65 zero seal bytes.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { getAddress } from 'ethers';

const here = path.dirname(fileURLToPath(import.meta.url));

export function cliqueExtraData(signers: string[]): string {
  const body = signers
    .map((s) => getAddress(s).slice(2).toLowerCase())
    .sort()
    .join('');
  return '0x' + '00'.repeat(32) + body + '00'.repeat(65);
}

export function renderGenesis(client: 'geth' | 'besu', operator: string, signers: string[]): Record<string, unknown> {
  if (!signers.length) throw new Error('at least one signer address is required');
  const g = JSON.parse(fs.readFileSync(path.join(here, `genesis.${client}.json`), 'utf8')) as Record<string, unknown>;
  g[client === 'geth' ? 'extradata' : 'extraData'] = cliqueExtraData(signers);
  const alloc: Record<string, unknown> = {};
  for (const a of new Set([operator, ...signers].map((x) => getAddress(x).slice(2).toLowerCase()))) alloc[a] = { balance: '0x3635c9adc5dea00000' };
  g.alloc = alloc;
  return g;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [client, operator, ...signers] = process.argv.slice(2);
  if ((client !== 'geth' && client !== 'besu') || !operator || !signers.length) {
    console.error('usage: genesis.ts geth|besu <operatorAddress> <signerAddress> [...]');
    process.exit(2);
  }
  console.log(JSON.stringify(renderGenesis(client, operator, signers), null, 2));
}
