// The compiled suite (contracts/build, checked in: start-up needs no compiler).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Interface, type InterfaceAbi } from 'ethers';

export const SUITE = [
  'StackIdentity',
  'BandwidthToken',
  'QuellistTreasury',
  'NeedlecastRouter',
  'SleeveRegistry',
  'ResidueRegistry',
  'EpochAnchor',
  'ValidationRegistry',
] as const;
export type SuiteName = (typeof SUITE)[number];

export interface Artifact {
  contractName: string;
  abi: InterfaceAbi;
  bytecode: string;
}

const BUILD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../contracts/build');
const cache = new Map<string, Artifact>();

export function artifact(name: SuiteName | 'CortexToken'): Artifact {
  let a = cache.get(name);
  if (!a) {
    a = JSON.parse(fs.readFileSync(path.join(BUILD_DIR, `${name}.json`), 'utf8')) as Artifact;
    cache.set(name, a);
  }
  return a;
}

const ifaces = new Map<string, Interface>();

/** The contract's ABI as an ethers Interface, built once (building one per call was 2% of a loaded platform's CPU). */
export function iface(name: SuiteName | 'CortexToken'): Interface {
  let i = ifaces.get(name);
  if (!i) ifaces.set(name, (i = new Interface(artifact(name).abi)));
  return i;
}

/** Hash of the compiler inputs the artifacts were built from (build/manifest.json). */
export function artifactsHash(): string {
  return (JSON.parse(fs.readFileSync(path.join(BUILD_DIR, 'manifest.json'), 'utf8')) as { inputHash: string }).inputHash;
}

/** Token order on Cortex (BandwidthToken ids 0..4). */
export const CHAIN_TOKENS = ['compute', 'memory', 'sync', 'routing', 'residue'] as const;
export type ChainToken = (typeof CHAIN_TOKENS)[number];
