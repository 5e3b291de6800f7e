// The submitter's own EIP-1559 signer (subgraphs/chains/cortex/sign.ts) against ethers' Wallet: the
// same bytes for the same fields (RFC 6979 signatures are deterministic), across the RLP length
// boundaries, and a signature that recovers to the wallet's address.
import { randomBytes } from 'node:crypto';
import { Transaction, Wallet, keccak256 } from 'ethers';
import { describe, expect, it } from 'vitest';
import { signEip1559, type Eip1559Fields } from '../subgraphs/chains/cortex/sign.ts';

const hex = (n: number) => `0x${randomBytes(n).toString('hex')}`;

describe('signEip1559', () => {
  // Data sizes at the RLP boundaries: empty, one byte (below and at 0x80), 55 and 56 bytes (short
  // and long string headers), 255 and 256 (one and two length bytes), and an epoch's heads call.
  const sizes = [0, 1, 1, 55, 56, 255, 256, 7_365];
  for (const [i, size] of sizes.entries()) {
    it(`signs the bytes ethers signs (${size} bytes of data)`, async () => {
      const wallet = new Wallet(hex(32));
      const data = size === 1 ? (i === 1 ? '0x7f' : '0x80') : hex(size);
      const tx: Eip1559Fields = {
        chainId: i % 2 ? 31337 : 1,
        nonce: [0, 1, 127, 128, 255, 256, 65_535, 1_000_000][i]!,
        maxPriorityFeePerGas: i % 3 ? 0n : 1_000_000_000n,
        maxFeePerGas: 2_000_000_000n + BigInt(i) * 12_345n,
        gasLimit: 21_000n + BigInt(size) * 16n,
        to: hex(20),
        value: i === 3 ? 10n ** 18n : 0n,
        data,
      };
      const mine = signEip1559(tx, wallet.privateKey);
      const theirs = await wallet.signTransaction({ ...tx, type: 2 });
      expect(mine.raw).toBe(theirs);
      expect(mine.hash).toBe(keccak256(theirs).slice(2));
      const parsed = Transaction.from(mine.raw);
      expect(parsed.from).toBe(wallet.address);
      expect(parsed.data).toBe(data.toLowerCase());
      expect(parsed.nonce).toBe(tx.nonce);
    });
  }

  it('refuses malformed fields rather than signing something else', () => {
    const key = hex(32);
    const tx: Eip1559Fields = { chainId: 1, nonce: 0, maxPriorityFeePerGas: 0n, maxFeePerGas: 1n, gasLimit: 21_000n, to: hex(20), value: 0n, data: '0x' };
    expect(() => signEip1559({ ...tx, data: '0x123' }, key)).toThrow(/data/);
    expect(() => signEip1559({ ...tx, data: 'abcd' }, key)).toThrow(/data/);
    expect(() => signEip1559({ ...tx, to: hex(19) }, key)).toThrow(/to must be 20 bytes/);
    expect(() => signEip1559({ ...tx, nonce: -1 }, key)).toThrow(/nonce/);
    expect(() => signEip1559(tx, hex(31))).toThrow(/privateKey/);
  });
});
