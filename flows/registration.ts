// A stack's ERC-8004 agent registration file (the document its identity NFT's agentURI names):
// the standard's registration-v1 shape, listing the platform's endpoints for the stack. It spans
// contexts (the stack, its sleeves' identity endpoints, the suite on Cortex), so it is read here.
import { encodeBase58, getAddress } from 'ethers';
import type { Platform } from '../lib/platform.ts';
import { fromHex } from '../lib/crypto.ts';
import { CORTEX_CHAIN_ID, deploymentsFile, readDeployment, type Deployment } from '../subgraphs/chains/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';
import { stackView } from './stack-reads.ts';

export const REGISTRATION_TYPE = 'https://eips.ethereum.org/EIPS/eip-8004#registration-v1';
/** What the platform offers as trust: accepted residue proofs on the ERC-8004 ValidationRegistry. */
export const SUPPORTED_TRUST = ['residue-proof'] as const;
export const MCP_VERSION = '2025-06-18';

export interface RegistrationService {
  name: string;
  endpoint: string;
  version?: string;
}

export interface RegistrationFile {
  type: typeof REGISTRATION_TYPE;
  name: string;
  description: string;
  image: string;
  services: RegistrationService[];
  x402Support: boolean;
  active: boolean;
  registrations: { agentId: number; agentRegistry: string }[];
  supportedTrust: string[];
}

const trimBase = (base: string) => base.replace(/\/+$/, '');

/** did:key of an ed25519 public key (multicodec 0xed01, base58btc). */
export function didKey(pubKeyHex: string): string {
  return `did:key:z${encodeBase58(new Uint8Array([0xed, 0x01, ...fromHex(pubKeyHex)]))}`;
}

declare module '../lib/platform.ts' {
  interface Ports {
    /** The suite of the Cortex service running in this process (wired by the composition root). */
    cortexSuite: () => Deployment | undefined;
  }
}

/** The suite on Cortex: this process's Cortex service, else the deployments file it wrote. */
function deployment(p: Platform): Deployment | undefined {
  return p.ports.cortexSuite?.() ?? readDeployment(deploymentsFile(p.config.dataDir, CORTEX_CHAIN_ID));
}

/** A small SVG badge: ERC-721 apps show `image`; the stack has no picture of its own. */
function badge(name: string, pubKeyHex: string): string {
  const hue = parseInt(pubKeyHex.slice(0, 4), 16) % 360;
  const letter = (name.trim()[0] ?? '?').toUpperCase().replace(/[^A-Z0-9]/, '?');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96"><rect width="96" height="96" rx="16" fill="hsl(${hue},55%,45%)"/><text x="48" y="62" font-size="44" text-anchor="middle" fill="#fff" font-family="sans-serif">${letter}</text></svg>`;
  return `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
}

export async function registrationFile(p: Platform, stackId: string, opts: { mcp?: boolean } = {}): Promise<RegistrationFile> {
  const row = await getStackRow(p.db.prisma, stackId);
  const view = await stackView(p, row);
  const base = trimBase(p.config.urls.base);
  const alive = view.sleeves.filter((s) => s.alive);
  const services: RegistrationService[] = [
    { name: 'REST', endpoint: `${base}/v1/stacks/${encodeURIComponent(row.id)}`, version: 'v1' },
    { name: 'GraphQL', endpoint: `${base}/graphql` },
  ];
  if (opts.mcp) services.push({ name: 'MCP', endpoint: `${base}/mcp`, version: MCP_VERSION });
  services.push({ name: 'DID', endpoint: didKey(row.pubKey), version: 'v1' });
  for (const s of alive) if (s.identityUrl && !s.frozen) services.push({ name: `sleeve:${s.embodimentType}`, endpoint: s.identityUrl });
  const suite = deployment(p);
  return {
    type: REGISTRATION_TYPE,
    name: row.name,
    description:
      `${row.name}: a ${row.kind} Stack (agent identity) on the Cognitive Agent Platform, ${alive.length} sleeve(s) alive. ` +
      `Its ed25519 public key is ${row.pubKey} (the DID service); requests it signs carry that key.`,
    image: badge(row.name, row.pubKey),
    services,
    x402Support: false,
    active: alive.length > 0,
    registrations: suite ? [{ agentId: row.tokenId, agentRegistry: `eip155:${suite.chainId}:${getAddress(suite.contracts.StackIdentity)}` }] : [],
    supportedTrust: [...SUPPORTED_TRUST],
  };
}
