import { describe, it, expect } from 'vitest';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha512 } from '@noble/hashes/sha2.js';
import {
  DecryptError,
  EPOCH_KEY_SALT,
  constantTimeEqual,
  epochKey,
  fromHex,
  fromUtf8,
  generateIdentity,
  hkdfSha512,
  open,
  publicKeyFromSeed,
  randomHex,
  randomSecret,
  seal,
  sealWithIv,
  sha256,
  sha256Hex,
  sign,
  toHex,
  unwrapSecret,
  utf8,
  verify,
  wrapSecret,
  type Sealed,
} from './crypto.ts';

const range = (from: number, count: number) => toHex(Uint8Array.from({ length: count }, (_, i) => from + i));

describe('hex', () => {
  it('round trips and accepts either case', () => {
    expect(toHex(fromHex('00ff10Ab'))).toBe('00ff10ab');
    expect(fromHex('')).toEqual(new Uint8Array(0));
    expect(fromHex('DEADBEEF')).toEqual(new Uint8Array([0xde, 0xad, 0xbe, 0xef]));
  });

  it('rejects odd length and non-hex characters instead of truncating', () => {
    expect(() => fromHex('abc')).toThrow(RangeError);
    expect(() => fromHex('zz')).toThrow(RangeError);
    expect(() => fromHex('00 1')).toThrow(RangeError);
    expect(() => fromHex('0x00')).toThrow(RangeError);
    expect(() => fromHex('aag0')).toThrow(RangeError);
  });

  it('returns a plain Uint8Array that owns its memory', () => {
    const b = fromHex('0102');
    expect(b.constructor).toBe(Uint8Array);
    expect(b.buffer.byteLength).toBe(2);
  });
});

describe('SHA-256 (FIPS 180-2 examples)', () => {
  it('hashes the published messages', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(toHex(sha256(utf8('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')))).toBe(
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
    expect(sha256('abc')).toEqual(sha256(utf8('abc')));
  });
});

describe('HKDF-SHA512 (RFC 5869 test cases 1-3 run with SHA-512: the kullo.net vectors)', () => {
  it('test case 1: basic', () => {
    const okm = hkdfSha512(fromHex('0b'.repeat(22)), fromHex('000102030405060708090a0b0c'), fromHex('f0f1f2f3f4f5f6f7f8f9'), 42);
    expect(toHex(okm)).toBe('832390086cda71fb47625bb5ceb168e4c8e26a1a16ed34d9fc7fe92c1481579338da362cb8d9f925d7cb');
  });

  it('test case 2: long inputs', () => {
    const okm = hkdfSha512(fromHex(range(0x00, 80)), fromHex(range(0x60, 80)), fromHex(range(0xb0, 80)), 82);
    expect(toHex(okm)).toBe(
      'ce6c97192805b346e6161e821ed165673b84f400a2b514b2fe23d84cd189ddf1b695b48cbd1c8388441137b3ce28f16aa64ba33ba466b24df6cfcb021ecff235f6a2056ce3af1de44d572097a8505d9e7a93',
    );
  });

  it('test case 3: empty salt and info', () => {
    const okm = hkdfSha512(fromHex('0b'.repeat(22)), new Uint8Array(0), new Uint8Array(0), 42);
    expect(toHex(okm)).toBe('f5fa02b18298a72a8c23898a8703472c6eb179dc204c03425c970e3b164bf90fff22d04836d0e2343bac');
  });
});

describe('epochKey', () => {
  const master = fromHex(range(0x00, 32));

  it('is HKDF-SHA512(master, "cog-epoch-key-v1", stackId || 0x00 || decimal epoch, 32) as documented', () => {
    const key = epochKey(master, 'stk_1', 42);
    expect(key.byteLength).toBe(32);
    // Re-derived with an independent HKDF implementation from the documented recipe.
    const info = new Uint8Array([0x73, 0x74, 0x6b, 0x5f, 0x31, 0x00, 0x34, 0x32]);
    expect(toHex(key)).toBe(toHex(hkdf(sha512, master, utf8(EPOCH_KEY_SALT), info, 32)));
    expect(toHex(key)).toBe(toHex(hkdfSha512(master, utf8('cog-epoch-key-v1'), info, 32)));
  });

  it('separates stacks and epochs, and the NUL separator prevents ambiguity', () => {
    const keys = [epochKey(master, 'a1', 2), epochKey(master, 'a', 12), epochKey(master, 'a1', 3), epochKey(master, 'b1', 2)].map(toHex);
    expect(new Set(keys).size).toBe(4);
    expect(toHex(epochKey(master, 'a1', 2))).toBe(keys[0]);
  });

  it('rejects bad inputs', () => {
    expect(() => epochKey(new Uint8Array(8), 's', 0)).toThrow(RangeError);
    expect(() => epochKey(master, '', 0)).toThrow(RangeError);
    expect(() => epochKey(master, 's', -1)).toThrow(RangeError);
    expect(() => epochKey(master, 's', 1.5)).toThrow(RangeError);
  });
});

// McGrew & Viega, "The Galois/Counter Mode of Operation", Appendix B, 256-bit key test cases.
const GCM_K = 'feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308';
const GCM_IV = 'cafebabefacedbaddecaf888';
const GCM_P60 = 'd9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39';
const GCM_C60 = '522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662';

describe('seal: fresh ivs', () => {
  it('gives every seal its own iv, across the refills of the iv buffer, and each opens', () => {
    const key = randomSecret(32);
    const ivs = new Set<string>();
    const sealed = Array.from({ length: 2_000 }, (_, i) => seal(key, `m${i}`));
    for (const s of sealed) ivs.add(s.iv);
    expect(ivs.size).toBe(2_000);
    expect(new TextDecoder().decode(open(key, sealed[0]!))).toBe('m0');
    expect(new TextDecoder().decode(open(key, sealed[1_999]!))).toBe('m1999');
  });
});

describe('randomHex', () => {
  it('hands out fresh bytes from the same pool as the ivs: no repeat across refills, interleaved with seals', () => {
    const key = randomSecret(32);
    const seen = new Set<string>();
    for (let i = 0; i < 3_000; i++) {
      const id = randomHex(8);
      expect(id).toMatch(/^[0-9a-f]{16}$/);
      seen.add(id);
      seen.add(seal(key, 'x').iv);
    }
    expect(seen.size).toBe(6_000);
    expect(() => randomHex(0)).toThrow(RangeError);
    expect(() => randomHex(65)).toThrow(RangeError);
  });
});

describe('AES-256-GCM (GCM spec test cases 13-16)', () => {
  it('test case 13: zero key, empty plaintext', () => {
    const s = sealWithIv(new Uint8Array(32), new Uint8Array(12), new Uint8Array(0));
    expect(s).toEqual({ iv: '000000000000000000000000', ct: '530f8afbc74536b9a963b4f1c4cb738b', v: 1 });
    expect(open(new Uint8Array(32), s)).toEqual(new Uint8Array(0));
  });

  it('test case 14: zero key, one zero block', () => {
    const s = sealWithIv(new Uint8Array(32), new Uint8Array(12), new Uint8Array(16));
    expect(s.ct).toBe('cea7403d4d606b6e074ec5d3baf39d18' + 'd0d1c8a799996bf0265b98b5d48ab919');
  });

  it('test case 15: four blocks, no aad', () => {
    const s = sealWithIv(fromHex(GCM_K), fromHex(GCM_IV), fromHex(GCM_P60 + '1aafd255'));
    expect(s.ct).toBe(GCM_C60 + '898015ad' + 'b094dac5d93471bdec1a502270e3cc6c');
  });

  it('test case 16: 60-byte plaintext with aad, both directions', () => {
    const key = fromHex(GCM_K);
    const aad = fromHex('feedfacedeadbeeffeedfacedeadbeefabaddad2');
    const s = sealWithIv(key, fromHex(GCM_IV), fromHex(GCM_P60), aad);
    expect(s).toEqual({ iv: GCM_IV, ct: GCM_C60 + '76fc6ece0f4e1768cddf8853bb2d551b', v: 1 });
    expect(toHex(open(key, { iv: GCM_IV, ct: GCM_C60 + '76fc6ece0f4e1768cddf8853bb2d551b', v: 1 }, aad))).toBe(GCM_P60);
    expect(() => open(key, s)).toThrow(DecryptError); // aad is authenticated
  });
});

describe('seal / open', () => {
  const key = randomSecret(32);

  it('round trips text and bytes with a fresh 12-byte iv each time', () => {
    const a = seal(key, 'hello memory');
    const b = seal(key, 'hello memory');
    expect(a.v).toBe(1);
    expect(a.iv).toMatch(/^[0-9a-f]{24}$/);
    expect(a.ct).toMatch(/^[0-9a-f]+$/);
    expect(a.ct.length).toBe(2 * (12 + 16));
    expect(a.iv).not.toBe(b.iv);
    expect(fromUtf8(open(key, a))).toBe('hello memory');
    const bytes = randomSecret(1000);
    expect(open(key, seal(key, bytes, utf8('ctx')), utf8('ctx'))).toEqual(bytes);
  });

  it('throws DecryptError on any failure', () => {
    const s = seal(key, 'secret', utf8('aad'));
    const flip = (hex: string, at: number) => hex.slice(0, at) + (hex[at] === '0' ? '1' : '0') + hex.slice(at + 1);
    const bad: [string, () => unknown][] = [
      ['wrong key', () => open(randomSecret(32), s, utf8('aad'))],
      ['short key', () => open(new Uint8Array(16), s, utf8('aad'))],
      ['missing aad', () => open(key, s)],
      ['wrong aad', () => open(key, s, utf8('aae'))],
      ['flipped ct', () => open(key, { ...s, ct: flip(s.ct, 0) }, utf8('aad'))],
      ['flipped tag', () => open(key, { ...s, ct: flip(s.ct, s.ct.length - 1) }, utf8('aad'))],
      ['flipped iv', () => open(key, { ...s, iv: flip(s.iv, 3) }, utf8('aad'))],
      ['truncated tag', () => open(key, { ...s, ct: s.ct.slice(0, -2) }, utf8('aad'))],
      ['too short', () => open(key, { ...s, ct: 'abcd' }, utf8('aad'))],
      ['bad hex', () => open(key, { ...s, ct: 'zz' + s.ct.slice(2) }, utf8('aad'))],
      ['odd hex', () => open(key, { ...s, ct: s.ct + 'a' }, utf8('aad'))],
      ['short iv', () => open(key, { ...s, iv: s.iv.slice(2) }, utf8('aad'))],
      ['v 2', () => open(key, { ...s, v: 2 } as unknown as Sealed, utf8('aad'))],
      ['null', () => open(key, null as unknown as Sealed)],
      ['not an object', () => open(key, 'x' as unknown as Sealed)],
    ];
    for (const [name, f] of bad) expect(f, name).toThrow(DecryptError);
  });

  it('refuses bad keys and ivs when sealing', () => {
    expect(() => seal(new Uint8Array(31), 'x')).toThrow(RangeError);
    expect(() => sealWithIv(key, new Uint8Array(16), 'x')).toThrow(RangeError);
  });
});

describe('wrapSecret / unwrapSecret', () => {
  const kek = randomSecret(32);

  it('round trips in the compact v1 encoding', () => {
    const secret = randomSecret(32);
    const w = wrapSecret(kek, secret, 'stack:abc');
    expect(w).toMatch(/^v1\.[0-9a-f]{24}\.[0-9a-f]{96}$/);
    expect(unwrapSecret(kek, w, 'stack:abc')).toEqual(secret);
  });

  it('fails with DecryptError for another label, key or a mangled string', () => {
    const w = wrapSecret(kek, randomSecret(32), 'stack:abc');
    expect(() => unwrapSecret(kek, w, 'stack:abd')).toThrow(DecryptError);
    expect(() => unwrapSecret(randomSecret(32), w, 'stack:abc')).toThrow(DecryptError);
    expect(() => unwrapSecret(kek, w.replace(/^v1/, 'v2'), 'stack:abc')).toThrow(DecryptError);
    expect(() => unwrapSecret(kek, w + '.x', 'stack:abc')).toThrow(DecryptError);
    expect(() => unwrapSecret(kek, '', 'stack:abc')).toThrow(DecryptError);
  });
});

// RFC 8032 section 7.1.
const RFC8032 = [
  {
    name: 'TEST 1',
    seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    pub: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    msg: '',
    sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  },
  {
    name: 'TEST 2',
    seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    pub: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    msg: '72',
    sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  },
  {
    name: 'TEST 3',
    seed: 'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
    pub: 'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
    msg: 'af82',
    sig: '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
  },
];

describe('ed25519 (RFC 8032 7.1)', () => {
  for (const v of RFC8032) {
    it(`${v.name}: seed -> public key -> signature -> verify`, () => {
      expect(publicKeyFromSeed(v.seed)).toBe(v.pub);
      expect(sign(fromHex(v.msg), v.seed)).toBe(v.sig);
      expect(verify(v.sig, fromHex(v.msg), v.pub)).toBe(true);
      expect(verify(v.sig.toUpperCase(), fromHex(v.msg), v.pub)).toBe(true);
    });
  }

  it('rejects a changed message, signature or key', () => {
    const v = RFC8032[1];
    expect(verify(v.sig, fromHex('73'), v.pub)).toBe(false);
    expect(verify((v.sig[0] === '0' ? '1' : '0') + v.sig.slice(1), fromHex(v.msg), v.pub)).toBe(false);
    expect(verify(v.sig, fromHex(v.msg), RFC8032[0].pub)).toBe(false);
  });

  it('never throws on malformed input', () => {
    const v = RFC8032[0];
    const junk: [unknown, unknown, unknown][] = [
      ['', new Uint8Array(0), v.pub],
      [v.sig.slice(2), new Uint8Array(0), v.pub],
      [v.sig + '00', new Uint8Array(0), v.pub],
      ['zz' + v.sig.slice(2), new Uint8Array(0), v.pub],
      [v.sig, new Uint8Array(0), 'ff'.repeat(32)], // not a curve point
      [v.sig, new Uint8Array(0), v.pub.slice(1)],
      [v.sig, null, v.pub],
      [null, new Uint8Array(0), undefined],
      ['ff'.repeat(64), new Uint8Array(0), v.pub], // s >= L
      [123, 456, 789],
    ];
    for (const [s, m, p] of junk) {
      expect(() => verify(s as string, m as Uint8Array, p as string)).not.toThrow();
      expect(verify(s as string, m as Uint8Array, p as string)).toBe(false);
    }
  });

  it('generates working identities', () => {
    const id = generateIdentity();
    expect(id.pubKey).toMatch(/^[0-9a-f]{64}$/);
    expect(id.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    expect(publicKeyFromSeed(id.identityPriv)).toBe(id.pubKey);
    const sig = sign(utf8('POST /v1/perceive'), id.identityPriv);
    expect(sig).toMatch(/^[0-9a-f]{128}$/);
    expect(verify(sig, 'POST /v1/perceive', id.pubKey)).toBe(true);
    expect(generateIdentity().identityPriv).not.toBe(id.identityPriv);
    expect(() => sign(utf8('x'), 'abcd')).toThrow(RangeError);
  });
});

describe('randomSecret / constantTimeEqual', () => {
  it('randomSecret sizes and rejects nonsense', () => {
    expect(randomSecret().byteLength).toBe(32);
    expect(randomSecret(12).byteLength).toBe(12);
    expect(toHex(randomSecret())).not.toBe(toHex(randomSecret()));
    expect(() => randomSecret(0)).toThrow(RangeError);
    expect(() => randomSecret(1.5)).toThrow(RangeError);
  });

  it('compares bytes', () => {
    expect(constantTimeEqual(fromHex('0102'), fromHex('0102'))).toBe(true);
    expect(constantTimeEqual(fromHex('0102'), fromHex('0103'))).toBe(false);
    expect(constantTimeEqual(fromHex('0102'), fromHex('010203'))).toBe(false);
    expect(constantTimeEqual(new Uint8Array(0), new Uint8Array(0))).toBe(true);
  });
});
