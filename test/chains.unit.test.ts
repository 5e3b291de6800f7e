// Chains, pure parts: retarget convergence, header validation (each kind of bad block), the
// coherence roots recomputed independently with node:crypto.
import { describe, expect, it } from 'vitest';
import { SynapticField } from '../lib/mmr.ts';
import { generateIdentity, sign, verify } from '../lib/crypto.ts';
import { genesisBlock } from '../subgraphs/chains/medulla/chain.ts';
import { encodeHeader, meetsTarget, toBlock, type Block, type BlockHeader } from '../subgraphs/chains/medulla/header.ts';
import { MAX_STEP, nextDifficulty, RETARGET_WINDOW, type RetargetPoint } from '../subgraphs/chains/medulla/retarget.ts';
import { HeaderError, parseBlock, validateBlock, type ChainView } from '../subgraphs/chains/medulla/validate.ts';
import { computeRoots, crossRootOf, tupleMessage, ZERO_ROOT } from '../subgraphs/chains/thalamus/coherence.ts';
import { mth, sha } from './helpers/thalamus.ts';

/** Simulated miner: exponential solve times for a fixed hash rate (deterministic PRNG). */
function simulate(hashrate: number, intervalMs: number, d0: number, blocks: number, seed: number) {
  let s = seed;
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) + 0.5) / 2147483648;
  const chain: RetargetPoint[] = [
    { height: 0, tsMs: 0, difficulty: d0 },
    { height: 1, tsMs: 1e9, difficulty: d0 },
  ];
  let t = 1e9;
  for (let h = 2; h < blocks; h++) {
    const d = nextDifficulty(chain.slice(-(RETARGET_WINDOW + 1)), intervalMs);
    t += (-Math.log(rnd()) * d * 1000) / hashrate;
    chain.push({ height: h, tsMs: Math.round(t), difficulty: d });
  }
  return chain;
}

describe('retarget', () => {
  const H = 100_000;
  const T = 150;
  const ideal = (H * T) / 1000;
  for (const [label, d0] of [
    ['30x too easy', ideal / 30],
    ['8x too hard', ideal * 8],
  ] as const) {
    it(`converges from a ${label} start`, () => {
      for (const seed of [1, 2, 3]) {
        const chain = simulate(H, T, Math.round(d0), 300, seed);
        const last = chain.slice(-150);
        const meanSolve = (last[last.length - 1].tsMs - last[0].tsMs) / (last.length - 1);
        const meanD = last.reduce((a, b) => a + b.difficulty, 0) / last.length;
        expect(meanSolve).toBeGreaterThan(T * 0.8);
        expect(meanSolve).toBeLessThan(T * 1.25);
        expect(meanD / ideal).toBeGreaterThan(0.75);
        expect(meanD / ideal).toBeLessThan(1.3);
        // Within 30% of the ideal difficulty after at most 40 blocks.
        expect(chain.findIndex((b, i) => i > 1 && Math.abs(b.difficulty / ideal - 1) < 0.3)).toBeLessThan(40);
      }
    });
  }

  it('keeps the parent difficulty until solve times exist, and clamps each step', () => {
    expect(nextDifficulty([{ height: 0, tsMs: 0, difficulty: 500 }], 1000)).toBe(500);
    expect(
      nextDifficulty(
        [
          { height: 0, tsMs: 0, difficulty: 500 },
          { height: 1, tsMs: 9e9, difficulty: 500 },
        ],
        1000,
      ),
    ).toBe(500);
    const fast = [
      { height: 1, tsMs: 1000, difficulty: 1000 },
      { height: 2, tsMs: 1000, difficulty: 1000 },
    ];
    expect(nextDifficulty(fast, 1000)).toBe(1000 * MAX_STEP);
    const slow = [
      { height: 1, tsMs: 0, difficulty: 1000 },
      { height: 2, tsMs: 1e9, difficulty: 1000 },
    ];
    expect(nextDifficulty(slow, 1000)).toBe(1000 / MAX_STEP);
  });
});

// ------------------------------------------------------------------ header validation
const T = 1000;

class MemoryView implements ChainView {
  blocks = new Map<string, Block>();
  add(b: Block) {
    this.blocks.set(b.blockHash, b);
    return b;
  }
  get(h: string) {
    return this.blocks.get(h);
  }
  ancestors(hash: string, n: number) {
    const out: Block[] = [];
    let b = this.blocks.get(hash);
    while (b && out.length < n) {
      out.push(b);
      b = b.height ? this.blocks.get(b.prevHash) : undefined;
    }
    return out.reverse();
  }
  fieldRootAfter(hash: string) {
    return SynapticField.fromLeaves(this.ancestors(hash, 256).map((b) => b.blockHash)).rootHex();
  }
}

function mine(h: BlockHeader): Block {
  for (let nonce = 0; ; nonce++) {
    const b = toBlock({ ...h, nonce });
    if (meetsTarget(b.blockHash, b.difficulty)) return b;
  }
}

function child(view: MemoryView, parent: Block, over: Partial<BlockHeader> = {}): BlockHeader {
  return {
    prevHash: parent.blockHash,
    height: parent.height + 1,
    epoch: parent.height + 1,
    difficulty: nextDifficulty(view.ancestors(parent.blockHash, RETARGET_WINDOW + 1), T),
    tsMs: parent.tsMs + T,
    crossRoot: ZERO_ROOT,
    evmRoot: ZERO_ROOT,
    ipfsRoot: ZERO_ROOT,
    sleevesRoot: ZERO_ROOT,
    coherenceEpoch: null,
    synapticFieldRoot: view.fieldRootAfter(parent.blockHash),
    nonce: 0,
    ...over,
  };
}

function rejects(view: MemoryView, b: Block): string {
  try {
    validateBlock(b, view, { intervalMs: T, now: b.tsMs });
  } catch (e) {
    expect(e).toBeInstanceOf(HeaderError);
    return (e as HeaderError).code;
  }
  return 'accepted';
}

describe('header validation', () => {
  const view = new MemoryView();
  const g = view.add(genesisBlock(8));
  let tip = g;
  for (let i = 0; i < 5; i++) {
    const b = mine(child(view, tip));
    validateBlock(b, view, { intervalMs: T, now: b.tsMs });
    tip = view.add(b);
  }

  it('accepts a valid child with a committed tuple, and encodes 244 bytes', () => {
    const evmRoot = 'aa'.repeat(32);
    const ipfsRoot = 'bb'.repeat(32);
    const sleevesRoot = 'cc'.repeat(32);
    const b = mine(child(view, tip, { evmRoot, ipfsRoot, sleevesRoot, crossRoot: crossRootOf(evmRoot, ipfsRoot, sleevesRoot), coherenceEpoch: 3 }));
    expect(rejects(view, b)).toBe('accepted');
    expect(encodeHeader(b).length).toBe(244);
    expect(b.blockHash).toBe(sha(sha(encodeHeader(b))).toString('hex'));
    expect(parseBlock(JSON.parse(JSON.stringify(b)))).toEqual(b);
  });

  it('rejects each kind of bad block', () => {
    const good = mine(child(view, tip));
    expect(rejects(view, { ...good, nonce: good.nonce + 1 })).toBe('bad-hash');
    // A header whose hash misses the target (difficulty claimed far above what was worked).
    let weak = toBlock({ ...child(view, tip), difficulty: 1 << 30 });
    while (meetsTarget(weak.blockHash, weak.difficulty)) weak = toBlock({ ...weak, nonce: weak.nonce + 1 });
    expect(rejects(view, weak)).toBe('bad-pow');
    expect(rejects(view, mine(child(view, tip, { prevHash: 'ab'.repeat(32) })))).toBe('unknown-parent');
    expect(rejects(view, mine(child(view, tip, { height: tip.height + 2, epoch: tip.height + 2 })))).toBe('bad-height');
    expect(rejects(view, mine(child(view, tip, { epoch: tip.height + 7 })))).toBe('bad-epoch');
    expect(rejects(view, mine(child(view, tip, { difficulty: good.difficulty + 1 })))).toBe('bad-difficulty');
    expect(rejects(view, mine(child(view, tip, { tsMs: tip.tsMs - 1 })))).toBe('bad-ts');
    const future = mine(child(view, tip, { tsMs: tip.tsMs + 3 * 3600_000 }));
    expect(() => validateBlock(future, view, { intervalMs: T, now: tip.tsMs })).toThrow(/future/);
    expect(rejects(view, { ...good, ts: good.ts + 1 })).toBe('bad-ts'); // ts must be floor(tsMs / 1000)
    expect(rejects(view, mine(child(view, tip, { synapticFieldRoot: view.fieldRootAfter(g.blockHash) })))).toBe('bad-synaptic-root');
    expect(rejects(view, mine(child(view, tip, { evmRoot: '11'.repeat(32), crossRoot: '22'.repeat(32), coherenceEpoch: 2 })))).toBe('bad-cross-root');
    expect(rejects(view, mine(child(view, tip, { evmRoot: '11'.repeat(32) })))).toBe('bad-cross-root');
    expect(() => parseBlock({ ...good, blockHash: 'xyz' })).toThrow(HeaderError);
    expect(() => parseBlock({ ...good, difficulty: 0 })).toThrow(HeaderError);
  });
});

describe('coherence root', () => {
  it('recomputes every root from the documented leaf encodings', () => {
    const txs = ['0x' + 'ff'.repeat(32), '0x' + '01'.repeat(32), '0x' + '7a'.repeat(32)];
    const cids = ['cog://' + 'a'.repeat(64) + '@3', 'cog://' + 'b'.repeat(64) + '@3', 'cog://' + 'c'.repeat(64) + '@3', 'opaque-\u00e9\u{1f600}'];
    const sleeves = [
      { type: 'human', id: 'sleeve:human:2:bbbbbbbb' },
      { type: 'ai', id: 'sleeve:ai:1:aaaaaaaa' },
    ];
    const r = computeRoots({ evmTxHashes: txs, cids, sleeves });
    const evm = mth(
      txs
        .map((t) => t.slice(2))
        .sort()
        .map((h) => Buffer.from(h, 'hex')),
    );
    const ipfs = mth(cids.map((c) => sha(Buffer.from(c))));
    const sl = mth(['sleeve:ai:1:aaaaaaaa', 'sleeve:human:2:bbbbbbbb'].map((id) => sha(Buffer.from((id.includes(':ai:') ? 'ai' : 'human') + id))));
    expect(r.evmRoot).toBe(evm.toString('hex'));
    expect(r.ipfsRoot).toBe(ipfs.toString('hex'));
    expect(r.sleevesRoot).toBe(sl.toString('hex'));
    expect(r.btcRoot).toBe(ZERO_ROOT);
    expect(r.crossRoot).toBe(sha(Buffer.from('cog-coh-v1'), evm, Buffer.alloc(32), ipfs, sl).toString('hex'));
    const empty = computeRoots({ evmTxHashes: [], cids: [], sleeves: [] });
    expect(empty.ipfsRoot).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('signs tuples so that any change breaks the signature', () => {
    const id = generateIdentity();
    const t = { epoch: 5, ...computeRoots({ evmTxHashes: [], cids: ['x'], sleeves: [] }) };
    const sig = sign(tupleMessage(t), id.identityPriv);
    expect(verify(sig, tupleMessage(t), id.pubKey)).toBe(true);
    expect(verify(sig, tupleMessage({ ...t, epoch: 6 }), id.pubKey)).toBe(false);
  });
});

describe('Cortex operator address', () => {
  it("addressOf (OpenSSL) gives ethers' Wallet address, for the dev key and random keys", async () => {
    const { randomBytes } = await import('node:crypto');
    const { Wallet } = await import('ethers');
    const { addressOf } = await import('../subgraphs/chains/cortex/service.ts');
    const { ANVIL_DEV_KEY } = await import('../subgraphs/chains/cortex/deploy.ts');
    expect(addressOf(ANVIL_DEV_KEY)).toBe('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266');
    for (let i = 0; i < 20; i++) {
      const key = `0x${randomBytes(32).toString('hex')}`;
      expect(addressOf(key)).toBe(new Wallet(key).address);
    }
  });
});
