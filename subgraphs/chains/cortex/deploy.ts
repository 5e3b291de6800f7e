// The deploy step: the suite (the seven contracts and the ERC-8004 ValidationRegistry) once per chain, addresses in <dataDir>/deployments/<chainId>.json.
// Idempotent: an existing file whose addresses all hold code on the chain is kept as it is.
import fs from 'node:fs';
import path from 'node:path';
import { ContractFactory, Contract, JsonRpcProvider, Wallet, getCreateAddress, id, type JsonRpcPayload, type JsonRpcResult } from 'ethers';
import type { Config } from '../../../lib/config.ts';
import { artifact, artifactsHash, CHAIN_TOKENS, SUITE, type ChainToken, type SuiteName } from './artifacts.ts';
import { reportProgress } from '../../../lib/progress.ts';

/** anvil's first dev account (public, well known): the operator on an embedded or dev chain only. */
export const ANVIL_DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
export { CORTEX_CHAIN_ID } from './anvil.ts';

export interface Deployment {
  chainId: number;
  operator: string;
  /** Block of the last deploy transaction. */
  block: number;
  /** contracts/build input hash the suite was deployed from. */
  inputHash: string;
  deployedAt: string;
  contracts: Record<SuiteName, string>;
  /** The five ERC-20s created by BandwidthToken. */
  tokens: Record<ChainToken, string>;
}

/**
 * ethers' JSON-RPC provider with its bodies encoded and decoded by Node: ethers' FetchRequest turns
 * a string into UTF-8 and back one character at a time in JavaScript. A settlement's signed
 * transaction makes request bodies of hundreds of kilobytes (1.9% of the platform's CPU at
 * 1,000,000 stacks, `bench/scale.ts --profile`), and its receipt, a log per entry, a response of
 * megabytes: decoding one took 100-200 ms in one go under the perceive bench, every request of the
 * platform waiting (`bench/perceive.ts --profile`). The rest is ethers' own `_send`.
 */
class CortexProvider extends JsonRpcProvider {
  override async _send(payload: JsonRpcPayload | JsonRpcPayload[]): Promise<Array<JsonRpcResult>> {
    const request = this._getConnection();
    request.body = Buffer.from(JSON.stringify(payload));
    request.setHeader('content-type', 'application/json');
    const response = await request.send();
    response.assertOk();
    const text = Buffer.from(response.body ?? new Uint8Array()).toString('utf8');
    let resp: JsonRpcResult | JsonRpcResult[];
    try {
      resp = JSON.parse(text) as JsonRpcResult | JsonRpcResult[];
    } catch {
      throw new Error(`Cortex node ${request.url} answered ${response.statusCode} with a body that is not JSON (${text.length} characters)`);
    }
    return Array.isArray(resp) ? resp : [resp];
  }
}

export function providerFor(rpcUrl: string, pollingInterval = 1000): JsonRpcProvider {
  return new CortexProvider(rpcUrl, undefined, { staticNetwork: true, pollingInterval, cacheTimeout: -1 });
}

/** CORTEX_OPERATOR_KEY (config.cortex.operatorKey), or anvil's dev key when the node is anvil (never on a real network). */
export async function operatorKey(provider: JsonRpcProvider, configured?: string): Promise<string> {
  if (configured) return configured;
  const client = String(await provider.send('web3_clientVersion', [])).toLowerCase();
  if (client.startsWith('anvil')) return ANVIL_DEV_KEY;
  throw new Error('CORTEX_OPERATOR_KEY is required for a Cortex node that is not anvil');
}

export function deploymentsFile(dataDir: string, chainId: number): string {
  return path.join(dataDir, 'deployments', `${chainId}.json`);
}

export function readDeployment(file: string): Deployment | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as Deployment;
  } catch {
    return undefined;
  }
}

/** True when every address of the deployment has code on the chain the provider talks to. */
export async function suiteLive(provider: JsonRpcProvider, d: Deployment): Promise<boolean> {
  const chainId = Number((await provider.getNetwork()).chainId);
  if (chainId !== d.chainId) return false;
  // A file from before a contract joined the suite lacks its address: not live, deploy afresh.
  if (SUITE.some((n) => typeof d.contracts?.[n] !== 'string')) return false;
  // The node's hex as it answers: ethers' getCode turns each contract's code into bytes and back
  // (hexlify: 23 ms of a restart's main thread for the suite), and only its emptiness is asked.
  const codes = await Promise.all(SUITE.map((n) => provider.send('eth_getCode', [d.contracts[n], 'latest']) as Promise<unknown>));
  return codes.every((c) => typeof c === 'string' && /^0x[0-9a-fA-F]+$/.test(c) && c !== '0x');
}

/**
 * Deploys the suite unless `file` already describes a live one. Returns the deployment and
 * whether it is new (a fresh chain: the outbox then replays its history onto it). `mine`: the
 * node is our own anvil, which is asked to mine the deploy transactions at once (evm_mine)
 * instead of at its next block, up to a block time (4 s) later. `redeployStale`: a live suite
 * built from other contract sources than contracts/build is deployed afresh too (our own dev
 * chain: the platform's calls may need functions the old suite lacks); elsewhere it is kept, and
 * the Cortex service warns.
 */
export async function ensureSuite(
  provider: JsonRpcProvider,
  key: string,
  file: string,
  opts: { mine?: boolean; redeployStale?: boolean } = {},
): Promise<{ deployment: Deployment; fresh: boolean }> {
  const existing = readDeployment(file);
  const stale = existing?.inputHash !== artifactsHash();
  if (existing && !(opts.redeployStale && stale) && (await suiteLive(provider, existing))) return { deployment: existing, fresh: false };
  const wallet = new Wallet(key, provider);
  const operator = wallet.address;
  const chainId = Number((await provider.getNetwork()).chainId);
  let nonce = await provider.getTransactionCount(operator, 'pending');
  const fee = await provider.getFeeData();
  const feeFields = fee.maxFeePerGas
    ? { maxFeePerGas: fee.maxFeePerGas, maxPriorityFeePerGas: fee.maxPriorityFeePerGas ?? 0n }
    : { gasPrice: fee.gasPrice ?? 1_000_000_000n };
  const addresses = {} as Record<SuiteName, string>;
  const sent: { wait(confirms: number, timeout: number): Promise<unknown> }[] = [];
  // Addresses are known from the nonces, so every deploy goes out without waiting for a block.
  for (const [i, name] of SUITE.entries()) {
    reportProgress('cortex', `deploying ${name} (${i + 1}/${SUITE.length})`);
    const a = artifact(name);
    const args: unknown[] =
      name === 'ResidueRegistry' ? [operator, addresses.BandwidthToken] : name === 'ValidationRegistry' ? [addresses.StackIdentity] : [operator];
    const tx = await new ContractFactory(a.abi, a.bytecode, wallet).getDeployTransaction(...args);
    const gasLimit = ((await provider.estimateGas({ ...tx, from: operator })) * 12n) / 10n;
    addresses[name] = getCreateAddress({ from: operator, nonce });
    sent.push(await wallet.sendTransaction({ ...tx, nonce: nonce++, gasLimit, chainId, ...feeFields }));
  }
  const bandwidth = new Contract(addresses.BandwidthToken, artifact('BandwidthToken').abi, wallet);
  sent.push(await bandwidth.grantRole(id('MINTER_ROLE'), addresses.ResidueRegistry, { nonce: nonce++, gasLimit: 120_000n, ...feeFields }));
  reportProgress('cortex', `waiting for ${sent.length} deploy transactions to be mined`);
  if (opts.mine) await provider.send('evm_mine', []);
  // Each wait looks for its receipt at once, then at each new block.
  const receipts = (await Promise.all(sent.map((r) => r.wait(1, 120_000)))) as ({ status: number; blockNumber: number } | null)[];
  if (receipts.some((r) => r?.status !== 1)) throw new Error('Cortex suite deployment failed: a deploy transaction reverted');
  const tokens = {} as Record<ChainToken, string>;
  const addrs = await Promise.all(CHAIN_TOKENS.map((_, i) => bandwidth.tokenAddress(i) as Promise<string>));
  CHAIN_TOKENS.forEach((t, i) => (tokens[t] = addrs[i]));
  const deployment: Deployment = {
    chainId,
    operator,
    block: Math.max(...receipts.map((r) => r!.blockNumber)),
    inputHash: artifactsHash(),
    deployedAt: new Date().toISOString(),
    contracts: addresses,
    tokens,
  };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file + '.tmp', JSON.stringify(deployment, null, 2) + '\n');
  fs.renameSync(file + '.tmp', file);
  return { deployment, fresh: true };
}

/** The deploy step by RPC URL: what `cog deploy` runs. */
export async function deploySuite(rpcUrl: string, key: string, file: string): Promise<Deployment> {
  const provider = providerFor(rpcUrl);
  try {
    return (await ensureSuite(provider, key, file)).deployment;
  } finally {
    provider.destroy();
  }
}

/** `cog deploy`: against CORTEX_RPC_URL (or the local Cortex URL); prints the deployments file. */
export async function deployCommand(config: Config): Promise<Deployment> {
  const rpcUrl = config.cortexRpcUrl ?? config.urls.cortex;
  const provider = providerFor(rpcUrl);
  try {
    const chainId = Number((await provider.getNetwork()).chainId);
    const file = deploymentsFile(config.dataDir, chainId);
    const key = await operatorKey(provider, config.cortex.operatorKey);
    const { deployment, fresh } = await ensureSuite(provider, key, file);
    process.stdout.write(`${fresh ? 'deployed' : 'already deployed'}: ${file}\n${JSON.stringify(deployment.contracts, null, 2)}\n`);
    return deployment;
  } finally {
    provider.destroy();
  }
}
