// The seven Cortex contracts against a real anvil: every rule and role, including the refusals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Contract, id, ZeroHash } from 'ethers';
import fs from 'node:fs';
import { startTestChain, type TestChain } from './helpers/test-chain.ts';
import { revertReason } from '../subgraphs/chains/cortex/submitter.ts';
import { artifact } from '../subgraphs/chains/cortex/artifacts.ts';
import { deploySuite, ensureSuite, suiteLive, ANVIL_DEV_KEY } from '../subgraphs/chains/cortex/deploy.ts';
import { recordKey } from '../subgraphs/chains/cortex/calls.ts';
import { artifactsCurrent } from '../contracts/compile.ts';
import { sha256, toHex, fromHex, utf8 } from '../lib/crypto.ts';

let c: TestChain;
beforeAll(async () => {
  c = await startTestChain({}); // automine: one block per transaction
});
afterAll(async () => {
  await c?.close();
});

/** Sends and waits; resolves to the revert name when it reverts. */
async function reverts(p: Promise<unknown>): Promise<string> {
  try {
    const tx = (await p) as { wait(): Promise<unknown> };
    await tx.wait();
  } catch (e) {
    return revertReason(e);
  }
  throw new Error('expected a revert');
}
const send = async (p: Promise<unknown>) => (await ((await p) as { wait(): Promise<{ status: number }> }).wait()).status;
const CPV1 = [1000, 1000, 1000, 1000, 1000];
const h32 = (s: string) => '0x' + toHex(sha256(s));

it('build artifacts are current with the Solidity sources', () => {
  expect(artifactsCurrent()).toBe(true);
});

it('a deployment is live when every contract of it has code on this chain, and a restart keeps it', async () => {
  expect(await suiteLive(c.provider, c.suite)).toBe(true);
  // ensureSuite on the same file (a restart) reuses the suite: nothing deployed, the same addresses.
  const again = await ensureSuite(c.provider, ANVIL_DEV_KEY, c.file);
  expect(again.fresh).toBe(false);
  expect(again.deployment.contracts).toEqual(c.suite.contracts);
  // An address without code (a fresh chain), or a deployment of another chain, is not live.
  const [first] = Object.keys(c.suite.contracts) as Array<keyof typeof c.suite.contracts>;
  expect(await suiteLive(c.provider, { ...c.suite, contracts: { ...c.suite.contracts, [first!]: c.stranger.address } })).toBe(false);
  expect(await suiteLive(c.provider, { ...c.suite, chainId: c.suite.chainId + 1 })).toBe(false);
});

describe('StackIdentity', () => {
  it('mints by the operator only, once per tokenId and per stackId, CPV in [0, 2]', async () => {
    const si = c.contract('StackIdentity');
    expect(await send(si.mint(c.operator.address, 1, CPV1, 'stack:human:1:aaaaaaaaaaaa', ''))).toBe(1);
    expect(await si.ownerOf(1)).toBe(c.operator.address);
    const [cpv, epoch, head, stackId] = await si.stackOf(1);
    expect(cpv.map(Number)).toEqual(CPV1);
    expect([Number(epoch), head, stackId]).toEqual([0, '', 'stack:human:1:aaaaaaaaaaaa']);
    expect(Number(await si.tokenOfStack(id('stack:human:1:aaaaaaaaaaaa')))).toBe(1);
    expect(await reverts(c.contract('StackIdentity', c.stranger).mint(c.stranger.address, 2, CPV1, 'stack:x', ''))).toMatch(
      /^AccessControlUnauthorizedAccount/,
    );
    expect(await reverts(si.mint(c.operator.address, 1, CPV1, 'stack:other', ''))).toMatch(/^ERC721InvalidSender/);
    expect(await reverts(si.mint(c.operator.address, 2, CPV1, 'stack:human:1:aaaaaaaaaaaa', ''))).toMatch(/^StackIdTaken/);
    expect(await reverts(si.mint(c.operator.address, 2, [1000, 2001, 0, 0, 0], 'stack:b', ''))).toBe('CpvOutOfRange(1, 2001)');
    expect(await reverts(si.mint(c.operator.address, 2, CPV1, '', ''))).toBe('EmptyStackId()');
    expect(Number(await si.totalMinted())).toBe(1);
    // Platform ids stay below FOREIGN_ID_BASE (2^32), where register() counts up.
    expect(await reverts(si.mint(c.operator.address, 0, CPV1, 'stack:zero', ''))).toBe('TokenIdOutOfRange(0)');
    expect(await reverts(si.mint(c.operator.address, 1n << 32n, CPV1, 'stack:high', ''))).toBe(`TokenIdOutOfRange(${1n << 32n})`);
    // The operator is the token's approved address (it manages the stack), the owner its wallet.
    expect(await si.getApproved(1)).toBe(c.operator.address);
    expect(await si.getAgentWallet(1)).toBe(c.operator.address);
    expect(await si.tokenURI(1)).toBe('');
  });

  it('updates epoch and episodicHead forward only, CPV by the operator', async () => {
    const si = c.contract('StackIdentity');
    expect(await send(si.updateStack(1, 5, 'cog://' + 'ab'.repeat(32) + '@5'))).toBe(1);
    expect(await reverts(si.updateStack(1, 4, 'x'))).toBe('EpochBackwards(5, 4)');
    expect(await reverts(si.updateStack(99, 5, 'x'))).toMatch(/^ERC721NonexistentToken/);
    expect(await reverts(c.contract('StackIdentity', c.stranger).updateStack(1, 6, 'x'))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await send(si.updateCpv(1, [2000, 0, 500, 1500, 1000]))).toBe(1);
    const [cpv, epoch, head] = await si.stackOf(1);
    expect(cpv.map(Number)).toEqual([2000, 0, 500, 1500, 1000]);
    expect(Number(epoch)).toBe(5);
    expect(head).toBe('cog://' + 'ab'.repeat(32) + '@5');
    expect(await reverts(c.contract('StackIdentity', c.stranger).updateCpv(1, CPV1))).toMatch(/^AccessControlUnauthorizedAccount/);
  });

  it('updates many heads in one call: applies each forward, skips a token that is no platform stack or whose epoch would go back', async () => {
    const si = c.contract('StackIdentity');
    expect(await send(si.mint(c.operator.address, 7, CPV1, 'stack:human:7:aaaaaaaaaaaa', ''))).toBe(1);
    const head = (n: number) => `cog://${String(n).repeat(64)}@${n}`;
    const tx = await si.updateStacks([1, 7, 99, 7], [6, 3, 3, 2], [head(6), head(3), head(9), head(2)]);
    const receipt = await tx.wait();
    // Applied: token 1 at epoch 6 and token 7 at 3; skipped: 99 (no stack) and 7 going back to 2.
    const applied = receipt.logs
      .map((l: { topics: string[]; data: string }) => si.interface.parseLog(l))
      .map((e: { args: unknown[] }) => [Number(e.args[0]), Number(e.args[1]), e.args[2]]);
    expect(applied).toEqual([
      [1, 6, head(6)],
      [7, 3, head(3)],
    ]);
    expect([Number((await si.stackOf(1))[1]), (await si.stackOf(1))[2]]).toEqual([6, head(6)]);
    expect([Number((await si.stackOf(7))[1]), (await si.stackOf(7))[2]]).toEqual([3, head(3)]);
    expect(await reverts(si.updateStacks([1], [7, 8], [head(7)]))).toBe('LengthMismatch(1, 2, 1)');
    expect(await reverts(c.contract('StackIdentity', c.stranger).updateStacks([1], [7], [head(7)]))).toMatch(/^AccessControlUnauthorizedAccount/);
  });
});

describe('BandwidthToken', () => {
  it('is five ERC-20s (3 decimals, RT non-decaying) with stack-scoped balances', async () => {
    const bw = c.contract('BandwidthToken');
    const names: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = new Contract(await bw.tokenAddress(i), artifact('CortexToken').abi, c.provider);
      names.push(await t.symbol());
      expect(Number(await t.decimals())).toBe(3);
      expect(await t.decays()).toBe(i !== 4);
    }
    expect(names).toEqual(['CMP', 'MEM', 'SYN', 'RTE', 'RT']);
    expect(await send(bw.mintBatch(7, [0, 1, 4], [250_000, 1000, 5]))).toBe(1);
    expect(await send(bw.burnBatch(7, [0], [500]))).toBe(1);
    expect((await bw.balancesOf(7)).map(Number)).toEqual([249_500, 1000, 0, 0, 5]);
    const compute = new Contract(await bw.tokenAddress(0), artifact('CortexToken').abi, c.provider);
    expect(Number(await compute.totalSupply())).toBe(249_500);
    expect(Number(await compute.balanceOf(c.suite.contracts.BandwidthToken))).toBe(249_500);
  });

  it('refuses over-burns, unknown tokens, zero amounts, strangers and direct ERC-20 mints', async () => {
    const bw = c.contract('BandwidthToken');
    expect(await reverts(bw.burn(7, 1, 1001))).toBe('InsufficientStackBalance(7, 1, 1000, 1001)');
    expect(await reverts(bw.mint(7, 5, 1))).toBe('UnknownToken(5)');
    expect(await reverts(bw.mint(7, 0, 0))).toBe('ZeroAmount()');
    expect(await reverts(bw.mintBatch(7, [0, 1], [1]))).toBe('LengthMismatch()');
    expect(await reverts(c.contract('BandwidthToken', c.stranger).mint(7, 0, 1))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await reverts(c.contract('BandwidthToken', c.stranger).burn(7, 0, 1))).toMatch(/^AccessControlUnauthorizedAccount/);
    const compute = new Contract(await bw.tokenAddress(0), artifact('CortexToken').abi, c.operator);
    expect(await reverts(compute.mint(c.operator.address, 1))).toBe('NotManager()');
    expect(Number(await bw.balanceOf(7, 1))).toBe(1000);
  });

  it('settles an epoch in one call: signed deltas per stack and token in order, each settlement id once, by the minter only', async () => {
    const bw = c.contract('BandwidthToken');
    const compute = new Contract(await bw.tokenAddress(0), artifact('CortexToken').abi, c.provider);
    const memory = new Contract(await bw.tokenAddress(1), artifact('CortexToken').abi, c.provider);
    const before = [(await bw.balancesOf(7)).map(Number), Number(await compute.totalSupply()), Number(await memory.totalSupply())];
    // 7: +100 compute, -1000 memory (all it has); 8: +50 compute, then -20 of it in the same call.
    expect(await send(bw.settle(41, 3, [7, 8, 7, 8], [0, 0, 1, 0], [100, 50, -1000, -20]))).toBe(1);
    expect((await bw.balancesOf(7)).map(Number)).toEqual([before[0][0] + 100, 0, 0, 0, before[0][4]]);
    expect((await bw.balancesOf(8)).map(Number)).toEqual([30, 0, 0, 0, 0]);
    expect(Number(await compute.totalSupply())).toBe(Number(before[1]) + 130);
    expect(Number(await memory.totalSupply())).toBe(Number(before[2]) - 1000);
    expect(await bw.settled(41)).toBe(true);
    // The same settlement again (a re-sent or re-signed transaction) succeeds and changes nothing.
    expect(await send(bw.settle(41, 3, [7, 8, 7, 8], [0, 0, 1, 0], [100, 50, -1000, -20]))).toBe(1);
    expect((await bw.balancesOf(8)).map(Number)).toEqual([30, 0, 0, 0, 0]);
    expect(Number(await compute.totalSupply())).toBe(Number(before[1]) + 130);
    expect(await bw.queryFilter(bw.filters.Settled(41))).toHaveLength(1);
    // In order: 8 cannot burn before it is credited; the whole settlement reverts and is not recorded.
    expect(await reverts(bw.settle(42, 3, [8, 8], [2, 2], [-1, 5]))).toBe('InsufficientStackBalance(8, 2, 0, 1)');
    expect(await bw.settled(42)).toBe(false);
    expect(await reverts(bw.settle(42, 3, [8], [5], [1]))).toBe('UnknownToken(5)');
    expect(await reverts(bw.settle(42, 3, [8], [0], [0]))).toBe('ZeroAmount()');
    expect(await reverts(bw.settle(42, 3, [8, 8], [0], [1]))).toBe('LengthMismatch()');
    expect(await reverts(c.contract('BandwidthToken', c.stranger).settle(42, 3, [8], [0], [1]))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await bw.settled(42)).toBe(false);
  });
});

describe('QuellistTreasury', () => {
  it('computes EBC decay on-chain: max(floor, e^(-decay x delta)), CPV-scaled emission', async () => {
    const tr = c.contract('QuellistTreasury');
    for (const d of [0, 1, 7, 13, 27, 28, 29, 100, 10_000]) {
      const f = Number(await tr.ebcFactor(d, 50, 250)) / 1e18;
      expect(f).toBeCloseTo(Math.max(0.25, Math.exp(-0.05 * d)), 12);
    }
    expect(Number(await tr.ebcFactor(10, 50, 0)) / 1e18).toBeCloseTo(Math.exp(-0.5), 12);
    expect((await tr.quote([1000, 1000, 1000, 1000], 0, 50, 250)).map(Number)).toEqual([100_000, 100_000, 100_000, 100_000]);
    const q = (await tr.quote([2000, 500, 0, 1000], 10, 50, 250)).map(Number);
    expect(q[0]).toBe(Math.floor(200_000 * Math.exp(-0.5)));
    expect(q[2]).toBe(0);
    expect(await reverts(tr.ebcFactor(1, 50, 1001))).toBe('BadParameter()');
  });

  it('records one emission per stack and epoch, by the operator only', async () => {
    const tr = c.contract('QuellistTreasury');
    expect(await send(tr.recordEmission(1, 3, [100_000, 100_000, 100_000, 100_000, 0]))).toBe(1);
    expect(await reverts(tr.recordEmission(1, 3, [1, 1, 1, 1, 0]))).toBe('AlreadyEmitted(1, 3)');
    expect(await reverts(c.contract('QuellistTreasury', c.stranger).recordEmission(1, 4, [1, 1, 1, 1, 0]))).toMatch(/^AccessControlUnauthorizedAccount/);
    const [recorded, amounts] = await tr.emissionOf(1, 3);
    expect(recorded).toBe(true);
    expect(amounts.map(Number)).toEqual([100_000, 100_000, 100_000, 100_000, 0]);
    expect(Number(await tr.lastEmissionEpoch(1))).toBe(3);
  });

  it('records one whole-epoch emission (stacks served, core totals), by the operator only', async () => {
    const tr = c.contract('QuellistTreasury');
    expect(await send(tr.recordEpochEmission(9, 2, [200_000, 150_000, 100_000, 100_000]))).toBe(1);
    expect(await reverts(tr.recordEpochEmission(9, 1, [1, 1, 1, 1]))).toBe('AlreadyEmitted(0, 9)');
    expect(await reverts(c.contract('QuellistTreasury', c.stranger).recordEpochEmission(10, 1, [1, 1, 1, 1]))).toMatch(/^AccessControlUnauthorizedAccount/);
    const [recorded, stacks, totals] = await tr.epochEmissionOf(9);
    expect([recorded, Number(stacks), totals.map(Number)]).toEqual([true, 2, [200_000, 150_000, 100_000, 100_000]]);
  });
});

describe('NeedlecastRouter', () => {
  it('records one route per saga, between two different sleeves, compensates once, by the operator only', async () => {
    const nr = c.contract('NeedlecastRouter');
    expect(await send(nr.recordRoute('needle:01', 1, 'sleeve:human:1:aa', 'sleeve:ai:2:bb', 8, id('route')))).toBe(1);
    const r = await nr.routeOf('needle:01');
    expect([Number(r.stackTokenId), r.fromSleeve, r.toSleeve, r.routeHash, Number(r.shardCount), Number(r.status)]).toEqual([
      1,
      id('sleeve:human:1:aa'),
      id('sleeve:ai:2:bb'),
      id('route'),
      8,
      1,
    ]);
    expect(await reverts(nr.recordRoute('needle:01', 1, 'a', 'b', 8, ZeroHash))).toMatch(/^RouteExists/);
    expect(await reverts(nr.recordRoute('needle:02', 1, 'a', 'a', 8, ZeroHash))).toBe('SameSleeve()');
    expect(await reverts(c.contract('NeedlecastRouter', c.stranger).recordRoute('needle:03', 1, 'a', 'b', 8, ZeroHash))).toMatch(
      /^AccessControlUnauthorizedAccount/,
    );
    expect(await reverts(c.contract('NeedlecastRouter', c.stranger).compensate('needle:01'))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await send(nr.compensate('needle:01'))).toBe(1);
    expect(Number((await nr.routeOf('needle:01')).status)).toBe(2);
    expect(await reverts(nr.compensate('needle:01'))).toMatch(/^NotRouted/);
    expect(await reverts(nr.compensate('needle:none'))).toMatch(/^NotRouted/);
  });
});

describe('SleeveRegistry', () => {
  it('spawns, authorizes and decommissions; refuses repeats, unknown kinds and strangers', async () => {
    const sr = c.contract('SleeveRegistry');
    const key = recordKey('sleeve:ai:1:0000aaaa');
    expect(await send(sr.spawn('sleeve:ai:1:0000aaaa', 1, 'ai'))).toBe(1);
    expect([await sr.isAlive(key), await sr.isAuthorized(key), Number(await sr.aliveCount(1))]).toEqual([true, true, 1]);
    expect(await reverts(sr.spawn('sleeve:ai:1:0000aaaa', 1, 'ai'))).toMatch(/^SleeveExists/);
    expect(await reverts(sr.spawn('sleeve:x:2:0000aaaa', 1, 'robot'))).toBe('UnknownKind(robot)');
    expect(await reverts(c.contract('SleeveRegistry', c.stranger).spawn('sleeve:ai:3:0000aaaa', 1, 'ai'))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await send(sr.authorize(key, false))).toBe(1);
    expect(await sr.isAuthorized(key)).toBe(false);
    expect(await reverts(c.contract('SleeveRegistry', c.stranger).decommission(key))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await send(sr.decommission(key))).toBe(1);
    expect([await sr.isAlive(key), await sr.isAuthorized(key), Number(await sr.aliveCount(1))]).toEqual([false, false, 0]);
    expect(await reverts(sr.decommission(key))).toMatch(/^NotAlive/);
    expect(await reverts(sr.authorize(key, true))).toMatch(/^NotAlive/);
  });
});

describe('ResidueRegistry', () => {
  it('opens with a bounty; the first claim wins and mints ResidueToken to the claimant stack', async () => {
    const rr = c.contract('ResidueRegistry');
    const bw = c.contract('BandwidthToken');
    const key = recordKey('residue:shard-loss:abc');
    expect(await send(rr.open('residue:shard-loss:abc', 'shard-loss', 15_000))).toBe(1);
    expect(await reverts(rr.open('residue:shard-loss:abc', 'shard-loss', 15_000))).toMatch(/^ResidueExists/);
    expect(await reverts(rr.open('residue:x', 'shard-loss', 0))).toBe('ZeroBounty()');
    expect(await reverts(c.contract('ResidueRegistry', c.stranger).claim(key, 9, 'stack:9', ZeroHash))).toMatch(/^AccessControlUnauthorizedAccount/);
    const before = Number(await bw.balanceOf(9, 4));
    expect(await send(rr.claim(key, 9, 'stack:9', h32('proof')))).toBe(1);
    expect(Number(await bw.balanceOf(9, 4)) - before).toBe(15_000);
    expect(await reverts(rr.claim(key, 10, 'stack:10', h32('proof2')))).toMatch(/^NotOpen/);
    expect(await reverts(rr.claim(recordKey('residue:none'), 10, 'stack:10', ZeroHash))).toMatch(/^NotOpen/);
    const r = await rr.residueOf(key);
    expect([Number(r.status), Number(r.claimantTokenId), r.proofHash]).toEqual([2, 9, h32('proof')]);
    expect(Number(await bw.balanceOf(10, 4))).toBe(0);
    // Only the registry (granted MINTER_ROLE at deploy) and the operator mint.
    expect(await bw.hasRole(id('MINTER_ROLE'), c.suite.contracts.ResidueRegistry)).toBe(true);
  });
});

describe('EpochAnchor', () => {
  const fold = (evm: string, ipfs: string, sleeves: string) =>
    '0x' +
    toHex(
      sha256(new Uint8Array([...utf8('cog-coh-v1'), ...fromHex(evm.slice(2)), ...new Uint8Array(32), ...fromHex(ipfs.slice(2)), ...fromHex(sleeves.slice(2))])),
    );
  it('commits one coherence root per epoch, only the spec fold, and verifies it', async () => {
    const ea = c.contract('EpochAnchor');
    const [evm, ipfs, sl] = [h32('evm'), h32('ipfs'), h32('sleeves')];
    const cross = fold(evm, ipfs, sl);
    expect(await ea.foldRoots(evm, ipfs, sl)).toBe(cross);
    expect(await reverts(ea.anchor(1, h32('wrong'), evm, ipfs, sl))).toMatch(/^RootMismatch/);
    expect(await reverts(c.contract('EpochAnchor', c.stranger).anchor(1, cross, evm, ipfs, sl))).toMatch(/^AccessControlUnauthorizedAccount/);
    expect(await send(ea.anchor(1, cross, evm, ipfs, sl))).toBe(1);
    expect(await ea.verify(1, cross)).toBe(true);
    expect(await ea.verify(1, h32('wrong'))).toBe(false);
    expect(await ea.verify(2, cross)).toBe(false);
    expect(await reverts(ea.anchor(1, cross, evm, ipfs, sl))).toBe('AlreadyAnchored(1)');
    expect(Number(await ea.latestEpoch())).toBe(1);
  });
});

describe('deploy step', () => {
  it('is idempotent: a live deployment file is kept, no transaction sent', async () => {
    const nonce = await c.provider.getTransactionCount(c.operator.address);
    const d = await deploySuite(c.anvil.url, ANVIL_DEV_KEY, c.file);
    expect(d.contracts).toEqual(c.suite.contracts);
    expect(await c.provider.getTransactionCount(c.operator.address)).toBe(nonce);
    const onDisk = JSON.parse(fs.readFileSync(c.file, 'utf8'));
    expect(Object.keys(onDisk.contracts)).toEqual([
      'StackIdentity',
      'BandwidthToken',
      'QuellistTreasury',
      'NeedlecastRouter',
      'SleeveRegistry',
      'ResidueRegistry',
      'EpochAnchor',
      'ValidationRegistry',
    ]);
    expect(onDisk.chainId).toBe(131072);
  });
});

describe('Clique genesis (deploy/cortex)', () => {
  it('renders chain id 131072, period 4 and the signer extradata for geth and Besu', async () => {
    const { renderGenesis, cliqueExtraData } = await import('../deploy/cortex/genesis.ts');
    const signer = c.stranger.address;
    const extra = cliqueExtraData([signer]);
    expect(extra).toBe('0x' + '00'.repeat(32) + signer.slice(2).toLowerCase() + '00'.repeat(65));
    const geth = renderGenesis('geth', c.operator.address, [signer]) as {
      config: { chainId: number; clique: { period: number } };
      extradata: string;
      alloc: Record<string, unknown>;
    };
    expect([geth.config.chainId, geth.config.clique.period, geth.extradata]).toEqual([131072, 4, extra]);
    expect(Object.keys(geth.alloc)).toContain(c.operator.address.slice(2).toLowerCase());
    expect(JSON.stringify(geth.config)).not.toMatch(/shanghai|cancun/i);
    const besu = renderGenesis('besu', c.operator.address, [signer]) as {
      config: { chainId: number; clique: { blockperiodseconds: number } };
      extraData: string;
    };
    expect([besu.config.chainId, besu.config.clique.blockperiodseconds, besu.extraData]).toEqual([131072, 4, extra]);
  });
});
