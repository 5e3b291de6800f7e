// ERC-8004 Trustless Agents, driven as an outside indexer would: ethers against Cortex and plain
// HTTP against the gateway. A stack created over REST is an agent on the Identity Registry
// (StackIdentity) whose tokenURI serves a registration file of the standard's shape; the events
// are in the logs; the URI is guarded as the standard guards it; anyone registers an agent of
// their own without it becoming a platform stack (reconcile is not disturbed); an accepted residue
// proof can be checked on the ValidationRegistry.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Contract, decodeBase58, getAddress, solidityPackedKeccak256, id as keccakId, Wallet, ZeroAddress, type EventLog, type Log } from 'ethers';
import type { FastifyInstance } from 'fastify';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { createHttp } from '../lib/http.ts';
import { stackAddress } from '../lib/address.ts';
import stacksRest from '../compat-rest/stacks.ts';
import residuesRest from '../compat-rest/residues.ts';
import { startCortexWith, type CortexService } from '../subgraphs/chains/cortex/service.ts';
import { reconcileChain } from '../subgraphs/chains/cortex/reconcile.ts';
import { artifact } from '../subgraphs/chains/cortex/artifacts.ts';
import { STRANGER_KEY } from './helpers/test-chain.ts';
import { spawnSleeve, syncSleeve } from '../subgraphs/sleeves/sleeves.ts';
import { residueCollector } from '../flows/worker-passes.ts';
import { listResidues } from '../subgraphs/residues/residues.ts';
import { localHippocampus } from '../subgraphs/memory/hippocampus/client.ts';

// Port shift 35000: the gateway port 7070 + 35000.
const PORT = 42070;
const BASE = `http://127.0.0.1:${PORT}`;
const FOREIGN_ID_BASE = 1n << 32n;

let p: TestPlatform;
let cortex: CortexService & { close(): Promise<void> };
let app: FastifyInstance;
let identity: Contract;
let validation: Contract;
let stranger: Wallet;
const prevBlockTime = process.env.COG_CORTEX_BLOCK_TIME;

beforeAll(async () => {
  process.env.COG_CORTEX_BLOCK_TIME = '1';
  p = await testPlatform({ CORTEX_PORT: '0', COG_BASE_URL: `${BASE}/` });
  p.ports.hippocampus = localHippocampus(p);
  cortex = await startCortexWith(p, { submitter: { pollMs: 50 } });
  app = createHttp({ name: 'gateway-test', log: p.log });
  await app.register(stacksRest, { platform: p });
  await app.register(residuesRest, { platform: p });
  await app.listen({ host: '127.0.0.1', port: PORT });
  const provider = cortex.chain.provider;
  identity = new Contract(cortex.suite.contracts.StackIdentity, artifact('StackIdentity').abi, provider);
  validation = new Contract(cortex.suite.contracts.ValidationRegistry, artifact('ValidationRegistry').abi, provider);
  stranger = new Wallet(STRANGER_KEY, provider);
}, 180_000); // PGlite, anvil and the suite's deploy: slow on a loaded 2-core machine
afterAll(async () => {
  if (prevBlockTime === undefined) delete process.env.COG_CORTEX_BLOCK_TIME;
  else process.env.COG_CORTEX_BLOCK_TIME = prevBlockTime;
  await app?.close();
  await cortex?.close();
  await p?.cleanup();
});

async function until<T>(fn: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined && v !== '') return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function post<T>(path: string, body: unknown): Promise<T> {
  const r = await fetch(`${BASE}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (r.status >= 300) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

/** Sends as `who` and waits; the custom error's name when it reverts. */
async function attempt(who: Wallet, fn: string, args: unknown[]): Promise<{ ok: true; logs: readonly Log[] } | { ok: false; error: string }> {
  try {
    const c = identity.connect(who) as Contract;
    const tx = await c.getFunction(fn)(...args);
    const r = await tx.wait();
    return { ok: true, logs: r.logs };
  } catch (e) {
    const err = e as { revert?: { name?: string }; data?: string; message?: string };
    if (err.revert?.name) return { ok: false, error: err.revert.name };
    const parsed = typeof err.data === 'string' ? identity.interface.parseError(err.data) : null;
    return { ok: false, error: parsed?.name ?? String(err.message) };
  }
}

const events = (logs: readonly Log[], name: string) =>
  logs
    .map((l) => {
      try {
        return identity.interface.parseLog(l);
      } catch {
        return null;
      }
    })
    .filter((e) => e?.name === name);

/** The registration-v1 schema of ERC-8004, field for field: every problem found (empty = valid). */
function registrationProblems(f: Record<string, unknown>): string[] {
  const bad: string[] = [];
  const fields: Record<string, (v: unknown) => boolean> = {
    type: (v) => v === 'https://eips.ethereum.org/EIPS/eip-8004#registration-v1',
    name: (v) => typeof v === 'string' && v.length > 0,
    description: (v) => typeof v === 'string' && v.length > 0,
    image: (v) => typeof v === 'string' && /^(https?:|ipfs:|data:image\/)/.test(v),
    services: (v) => Array.isArray(v) && v.length > 0,
    x402Support: (v) => typeof v === 'boolean',
    active: (v) => typeof v === 'boolean',
    registrations: (v) => Array.isArray(v),
    supportedTrust: (v) => Array.isArray(v) && v.every((t) => typeof t === 'string'),
  };
  for (const [k, ok] of Object.entries(fields)) if (!ok(f[k])) bad.push(`${k}: ${JSON.stringify(f[k])}`);
  for (const k of Object.keys(f)) if (!(k in fields)) bad.push(`unknown field ${k}`);
  for (const s of (Array.isArray(f.services) ? f.services : []) as Record<string, unknown>[]) {
    if (typeof s.name !== 'string' || !s.name || typeof s.endpoint !== 'string' || !s.endpoint) bad.push(`service ${JSON.stringify(s)}`);
    if (s.version !== undefined && typeof s.version !== 'string') bad.push(`service version ${JSON.stringify(s)}`);
  }
  for (const r of (Array.isArray(f.registrations) ? f.registrations : []) as Record<string, unknown>[]) {
    if (!Number.isSafeInteger(r.agentId) || typeof r.agentRegistry !== 'string' || !/^eip155:\d+:0x[0-9a-fA-F]{40}$/.test(r.agentRegistry))
      bad.push(`registration ${JSON.stringify(r)}`);
    if (Object.keys(r).some((k) => k !== 'agentId' && k !== 'agentRegistry')) bad.push(`registration fields ${Object.keys(r).join(',')}`);
  }
  return bad;
}

interface StackOut {
  id: string;
  tokenId: number;
  pubKey: string;
  name: string;
}

describe('Identity Registry: platform stacks', () => {
  let ada: StackOut;

  it('a stack created over REST is registered with an agentURI naming its registration file', async () => {
    ada = await post<StackOut>('/v1/stacks', { name: 'ada' });
    const uri = await until(() => identity.tokenURI(ada.tokenId) as Promise<string>);
    expect(uri).toBe(`${BASE}/v1/stacks/${encodeURIComponent(ada.id)}/registration.json`);
    const owner = getAddress(stackAddress(ada.pubKey));
    expect(await identity.ownerOf(ada.tokenId)).toBe(owner);
    expect(await identity.getAgentWallet(ada.tokenId)).toBe(owner);
    // The platform manages its stack as the token's approved operator.
    expect(await identity.getApproved(ada.tokenId)).toBe(cortex.chain.wallet.address);
    expect(await identity.isPlatformStack(ada.tokenId)).toBe(true);
    // The logs an indexer reads: Transfer from zero, then Registered(agentId, agentURI, owner).
    const registered = (await identity.queryFilter(identity.filters.Registered(ada.tokenId))) as EventLog[];
    expect(registered).toHaveLength(1);
    expect([registered[0]!.args.agentURI, registered[0]!.args.owner]).toEqual([uri, owner]);
    const minted = (await identity.queryFilter(identity.filters.Transfer(ZeroAddress, null, ada.tokenId))) as EventLog[];
    expect(minted.map((e) => e.args.to)).toEqual([owner]);
    // ERC-721 metadata and ERC-4906 are advertised.
    expect(await identity.supportsInterface('0x5b5e139f')).toBe(true);
    expect(await identity.supportsInterface('0x49064906')).toBe(true);
  });

  it('the tokenURI serves a registration file of the standard shape', async () => {
    const uri = (await identity.tokenURI(ada.tokenId)) as string;
    // A sleeve whose runtime bound its identity endpoint is listed among the services.
    const sleeve = await spawnSleeve(p, { stackId: ada.id, embodimentType: 'ai', shape: 'A' });
    await p.db.prisma.sleeve.update({ where: { id: sleeve.id }, data: { identityPort: 43999 } });
    const res = await fetch(uri);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const file = (await res.json()) as Record<string, unknown> & { services: { name: string; endpoint: string; version?: string }[]; registrations: unknown[] };
    expect(registrationProblems(file)).toEqual([]);
    expect(file.name).toBe('ada');
    expect(file.active).toBe(true);
    expect(file.supportedTrust).toEqual(['residue-proof']);
    expect(file.registrations).toEqual([{ agentId: ada.tokenId, agentRegistry: `eip155:131072:${await identity.getAddress()}` }]);
    const byName = Object.fromEntries(file.services.map((s) => [s.name, s]));
    expect(byName.REST!.endpoint).toBe(`${BASE}/v1/stacks/${encodeURIComponent(ada.id)}`);
    expect(byName.GraphQL!.endpoint).toBe(`${BASE}/graphql`);
    expect(byName['sleeve:ai']!.endpoint).toBe(`http://127.0.0.1:43999/sleeves/${encodeURIComponent(sleeve.id)}/identity`);
    expect(byName.MCP).toBeUndefined(); // this gateway has no /mcp route
    // The public key, as a did:key (multicodec ed25519-pub 0xed01) and in the description.
    const did = byName.DID!.endpoint;
    expect(did).toMatch(/^did:key:z/);
    const raw = decodeBase58(did.slice('did:key:z'.length)).toString(16).padStart(68, '0');
    expect(raw).toBe(`ed01${ada.pubKey}`);
    expect(file.description).toContain(ada.pubKey);
    // The REST service named there answers.
    expect((await fetch(byName.REST!.endpoint)).status).toBe(200);
    // An unknown stack has no file: a problem, not a 5xx.
    const missing = await fetch(`${BASE}/v1/stacks/stack%3Anope/registration.json`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/problem\+json/);
  });

  it("setAgentURI: the stack's operator may, a stranger may not; URIUpdated names who", async () => {
    const before = (await identity.tokenURI(ada.tokenId)) as string;
    const denied = await attempt(stranger, 'setAgentURI', [ada.tokenId, 'https://evil.example/agent.json']);
    expect(denied).toEqual({ ok: false, error: 'NotAuthorized' });
    expect(await identity.tokenURI(ada.tokenId)).toBe(before);
    const moved = `${before}?v=2`;
    const done = await attempt(cortex.chain.wallet as Wallet, 'setAgentURI', [ada.tokenId, moved]);
    expect(done.ok).toBe(true);
    const ev = events((done as { logs: readonly Log[] }).logs, 'URIUpdated');
    expect(ev.map((e) => [e!.args.agentId, e!.args.newURI, e!.args.updatedBy])).toEqual([[BigInt(ada.tokenId), moved, cortex.chain.wallet.address]]);
    expect(await identity.tokenURI(ada.tokenId)).toBe(moved);
    expect((await attempt(stranger, 'setMetadata', [ada.tokenId, 'agentName', '0x01'])).ok).toBe(false);
    // A stranger cannot mint a platform stack or touch its CPV.
    expect((await attempt(stranger, 'mint', [stranger.address, 99, [1000, 1000, 1000, 1000, 1000], 'stack:x', ''])).ok).toBe(false);
  });
});

describe('Identity Registry: agents registered by anyone', () => {
  let agentId: bigint;

  it('register(string) by a stranger mints an agent that is no platform stack; its owner manages it', async () => {
    const r = await attempt(stranger, 'register(string)', ['https://agent.example/a.json']);
    expect(r.ok).toBe(true);
    const reg = events((r as { logs: readonly Log[] }).logs, 'Registered');
    expect(reg).toHaveLength(1);
    agentId = reg[0]!.args.agentId as bigint;
    expect(agentId >= FOREIGN_ID_BASE).toBe(true);
    expect([reg[0]!.args.agentURI, reg[0]!.args.owner]).toEqual(['https://agent.example/a.json', stranger.address]);
    expect(await identity.ownerOf(agentId)).toBe(stranger.address);
    expect(await identity.isPlatformStack(agentId)).toBe(false);
    expect(await identity.getAgentWallet(agentId)).toBe(stranger.address);
    // Its owner updates it; the platform operator may not (it is not the owner's operator).
    expect((await attempt(stranger, 'setAgentURI', [agentId, 'https://agent.example/b.json'])).ok).toBe(true);
    expect(await identity.tokenURI(agentId)).toBe('https://agent.example/b.json');
    expect(await attempt(cortex.chain.wallet as Wallet, 'setAgentURI', [agentId, 'x'])).toEqual({ ok: false, error: 'NotAuthorized' });
    // Nor may the platform treat it as a stack.
    expect(await attempt(cortex.chain.wallet as Wallet, 'updateStack', [agentId, 1, ''])).toEqual({ ok: false, error: 'NotPlatformStack' });
    // register() and register(string, MetadataEntry[]) too; agentWallet is a reserved key.
    const bare = await attempt(stranger, 'register()', []);
    expect(bare.ok && (await identity.tokenURI(events(bare.logs, 'Registered')[0]!.args.agentId)) === '').toBe(true);
    const withMeta = await attempt(stranger, 'register(string,(string,bytes)[])', ['ipfs://cid', [['agentName', '0x6164612e657468']]]);
    expect(withMeta.ok).toBe(true);
    const metaId = events((withMeta as { logs: readonly Log[] }).logs, 'Registered')[0]!.args.agentId;
    expect(await identity.getMetadata(metaId, 'agentName')).toBe('0x6164612e657468');
    expect(await attempt(stranger, 'register(string,(string,bytes)[])', ['ipfs://cid', [['agentWallet', '0x01']]])).toEqual({
      ok: false,
      error: 'ReservedMetadataKey',
    });
    expect(await attempt(stranger, 'setMetadata', [agentId, 'agentWallet', '0x01'])).toEqual({ ok: false, error: 'ReservedMetadataKey' });
    const set = await attempt(stranger, 'setMetadata', [agentId, 'agentName', '0x02']);
    expect(set.ok && events(set.logs, 'MetadataSet').map((e) => e!.args.metadataKey)).toEqual(['agentName']);
  });

  it("setAgentWallet needs the new wallet's EIP-712 signature; a transfer resets it", async () => {
    const wallet = Wallet.createRandom();
    const now = (await cortex.chain.provider.getBlock('latest'))!.timestamp;
    const deadline = now + 120;
    const domain = { name: 'ERC8004IdentityRegistry', version: '1', chainId: 131072, verifyingContract: await identity.getAddress() };
    const types = {
      AgentWalletSet: [
        { name: 'agentId', type: 'uint256' },
        { name: 'newWallet', type: 'address' },
        { name: 'owner', type: 'address' },
        { name: 'deadline', type: 'uint256' },
      ],
    };
    const sig = await wallet.signTypedData(domain, types, { agentId, newWallet: wallet.address, owner: stranger.address, deadline });
    const forged = await Wallet.createRandom().signTypedData(domain, types, { agentId, newWallet: wallet.address, owner: stranger.address, deadline });
    expect(await attempt(stranger, 'setAgentWallet', [agentId, wallet.address, deadline, forged])).toEqual({ ok: false, error: 'InvalidWalletSignature' });
    expect(await attempt(stranger, 'setAgentWallet', [agentId, wallet.address, now + 3600, sig])).toEqual({ ok: false, error: 'DeadlineTooFar' });
    const ok = await attempt(stranger, 'setAgentWallet', [agentId, wallet.address, deadline, sig]);
    expect(ok.ok).toBe(true);
    expect(await identity.getAgentWallet(agentId)).toBe(wallet.address);
    expect(await identity.getMetadata(agentId, 'agentWallet')).toBe(wallet.address.toLowerCase());
    const other = Wallet.createRandom().address;
    expect((await attempt(stranger, 'transferFrom', [stranger.address, other, agentId])).ok).toBe(true);
    expect(await identity.getAgentWallet(agentId)).toBe(ZeroAddress);
  });

  it('platform stacks keep their ids and reconcile sees no drift with foreign agents on the chain', async () => {
    const bob = await post<StackOut>('/v1/stacks', { name: 'bob', kind: 'ai' });
    expect(bob.tokenId).toBeLessThan(Number(FOREIGN_ID_BASE));
    await until(() => identity.tokenURI(bob.tokenId) as Promise<string>);
    await cortex.submitter.idle(20_000);
    const drift = await reconcileChain(p.db.prisma, cortex.chain);
    expect(drift).toEqual([]);
    expect(Number(await identity.totalRegistered())).toBe(3);
    const list = await fetch(`${BASE}/v1/stacks`);
    expect(list.status).toBe(200);
    expect(((await list.json()) as unknown[]).length).toBe(2);
  });
});

describe('Validation Registry: accepted residue proofs', () => {
  it("a claimed bounty's proof is checkable on chain: request and response 100 by the platform", async () => {
    p.setEpoch(10);
    const stale = await post<StackOut>('/v1/stacks', { name: 'stale' });
    const sleeve = await spawnSleeve(p, { stackId: stale.id, embodimentType: 'ai', shape: 'A' });
    await syncSleeve(p, sleeve.id);
    p.setEpoch(14);
    await residueCollector(p, 14);
    const residue = (await listResidues(p)).find((r) => r.sleeveId === sleeve.id)!;
    expect(residue.status).toBe('open');
    await syncSleeve(p, sleeve.id);
    const hunter = await post<StackOut>('/v1/stacks', { name: 'hunter' });
    const done = await post<{ status: string }>(`/v1/coordination/residues/${encodeURIComponent(residue.id)}/proof`, { claimant: hunter.id, proof: {} });
    expect(done.status).toBe('resolved');
    await cortex.submitter.idle(30_000);

    // A third party: the residue's claim on the ResidueRegistry, then its validation.
    const residues = new Contract(cortex.suite.contracts.ResidueRegistry, artifact('ResidueRegistry').abi, cortex.chain.provider);
    const key = keccakId(residue.id);
    const claim = (await residues.residueOf(key)) as { status: bigint; claimantTokenId: bigint; proofHash: string };
    expect(Number(claim.status)).toBe(2);
    expect(claim.claimantTokenId).toBe(BigInt(hunter.tokenId));
    expect(claim.proofHash).toBe(keccakId('{}'));
    const requestHash = solidityPackedKeccak256(['bytes32', 'bytes32'], [key, claim.proofHash]);
    const [validator, agentId, response, responseHash, tag] = (await validation.getValidationStatus(requestHash)) as [string, bigint, bigint, string, string];
    expect([validator, agentId, Number(response), responseHash, tag]).toEqual([
      cortex.chain.wallet.address,
      BigInt(hunter.tokenId),
      100,
      claim.proofHash,
      'residue-proof',
    ]);
    expect(await validation.getIdentityRegistry()).toBe(await identity.getAddress());
    const [count, avg] = (await validation.getSummary(hunter.tokenId, [cortex.chain.wallet.address], 'residue-proof')) as [bigint, bigint];
    expect([Number(count), Number(avg)]).toEqual([1, 100]);
    const requested = (await validation.queryFilter(validation.filters.ValidationRequest(null, hunter.tokenId, null, requestHash))) as EventLog[];
    expect(requested.map((e) => e.args.requestURI)).toEqual([`${BASE}/v1/coordination/residues/${encodeURIComponent(residue.id)}`]);
    const answered = (await validation.queryFilter(validation.filters.ValidationResponse(null, hunter.tokenId, requestHash))) as EventLog[];
    expect(answered.map((e) => Number(e.args.response))).toEqual([100]);
    // Only the named validator answers; a stranger's response is refused.
    const asStranger = validation.connect(stranger) as Contract;
    await expect(asStranger.validationResponse(requestHash, 0, '', claim.proofHash, 'residue-proof')).rejects.toThrow();
    // The requestURI resolves to the residue record.
    const rec = await fetch(requested[0]!.args.requestURI as string);
    expect(((await rec.json()) as { status: string }).status).toBe('resolved');
    expect((await p.db.prisma.residue.findUniqueOrThrow({ where: { id: residue.id } })).chainStatus).toBe('confirmed');
  });
});
