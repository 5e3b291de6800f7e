// Header validation: every block a node accepts (mined here or fetched from a peer) passes these
// checks against its parent, in this order. A failure names its kind (HeaderError.code).
import { isHex } from '../../../lib/crypto.ts';
import { crossRootOf, isEmptyTuple } from '../thalamus/coherence.ts';
import { hashHeader, meetsTarget, type Block } from './header.ts';
import { MAX_DIFFICULTY, nextDifficulty, RETARGET_WINDOW } from './retarget.ts';

export type HeaderErrorCode =
  | 'malformed'
  | 'bad-hash'
  | 'bad-pow'
  | 'unknown-parent'
  | 'bad-height'
  | 'bad-epoch'
  | 'bad-difficulty'
  | 'bad-ts'
  | 'bad-synaptic-root'
  | 'bad-cross-root';

export class HeaderError extends Error {
  constructor(
    public readonly code: HeaderErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'HeaderError';
  }
}

/** Blocks may not claim a time more than 2 h ahead of the validator's clock. */
export const MAX_FUTURE_MS = 2 * 60 * 60 * 1000;

export interface ChainView {
  get(hash: string): Block | undefined;
  /** The block `hash` and up to n-1 ancestors, oldest first. */
  ancestors(hash: string, n: number): Block[];
  /** Synaptic Field root over the 256 block hashes ending at `hash` (what its child commits). */
  fieldRootAfter(hash: string): string;
}

const HASH_FIELDS = ['blockHash', 'prevHash', 'crossRoot', 'evmRoot', 'ipfsRoot', 'sleevesRoot', 'synapticFieldRoot'] as const;
const uint = (v: unknown, max = Number.MAX_SAFE_INTEGER) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= max;

/** Shape check of a block received as JSON; returns a clean copy. */
export function parseBlock(x: unknown): Block {
  const o = x as Record<string, unknown>;
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new HeaderError('malformed', 'block must be an object');
  for (const f of HASH_FIELDS) {
    if (!isHex(o[f], 32) || (o[f] as string) !== (o[f] as string).toLowerCase()) throw new HeaderError('malformed', `${f} must be 64 lowercase hex`);
  }
  for (const f of ['height', 'epoch', 'ts', 'tsMs', 'nonce'] as const)
    if (!uint(o[f])) throw new HeaderError('malformed', `${f} must be a non-negative integer`);
  if (!uint(o.difficulty, MAX_DIFFICULTY) || (o.difficulty as number) < 1)
    throw new HeaderError('malformed', `difficulty must be an integer in [1, ${MAX_DIFFICULTY}]`);
  if (o.coherenceEpoch !== null && !uint(o.coherenceEpoch)) throw new HeaderError('malformed', 'coherenceEpoch must be a non-negative integer or null');
  return {
    blockHash: o.blockHash as string,
    prevHash: o.prevHash as string,
    height: o.height as number,
    epoch: o.epoch as number,
    difficulty: o.difficulty as number,
    ts: o.ts as number,
    tsMs: o.tsMs as number,
    nonce: o.nonce as number,
    crossRoot: o.crossRoot as string,
    evmRoot: o.evmRoot as string,
    ipfsRoot: o.ipfsRoot as string,
    sleevesRoot: o.sleevesRoot as string,
    coherenceEpoch: o.coherenceEpoch as number | null,
    synapticFieldRoot: o.synapticFieldRoot as string,
  };
}

/** Throws HeaderError unless `b` is a valid child of its parent in `view`. */
export function validateBlock(b: Block, view: ChainView, opts: { intervalMs: number; now?: number }): void {
  if (hashHeader(b) !== b.blockHash) throw new HeaderError('bad-hash', 'blockHash is not SHA-256d of the header');
  if (!meetsTarget(b.blockHash, b.difficulty)) throw new HeaderError('bad-pow', `hash does not meet the target of difficulty ${b.difficulty}`);
  const parent = view.get(b.prevHash);
  if (!parent) throw new HeaderError('unknown-parent', `parent ${b.prevHash} is unknown`);
  if (b.height !== parent.height + 1) throw new HeaderError('bad-height', `height ${b.height} does not follow parent height ${parent.height}`);
  if (b.epoch !== b.height) throw new HeaderError('bad-epoch', `epoch ${b.epoch} must equal height ${b.height}`);
  const want = nextDifficulty(view.ancestors(parent.blockHash, RETARGET_WINDOW + 1), opts.intervalMs);
  if (b.difficulty !== want) throw new HeaderError('bad-difficulty', `difficulty ${b.difficulty}, retarget requires ${want}`);
  const now = opts.now ?? Date.now();
  if (b.tsMs < parent.tsMs) throw new HeaderError('bad-ts', 'timestamp before its parent');
  if (b.tsMs > now + MAX_FUTURE_MS) throw new HeaderError('bad-ts', 'timestamp more than 2 h in the future');
  if (b.ts !== Math.floor(b.tsMs / 1000)) throw new HeaderError('bad-ts', 'ts must be floor(tsMs / 1000)');
  if (b.synapticFieldRoot !== view.fieldRootAfter(parent.blockHash))
    throw new HeaderError('bad-synaptic-root', 'synapticFieldRoot does not match the last 256 block hashes');
  if (b.coherenceEpoch === null) {
    if (!isEmptyTuple(b)) throw new HeaderError('bad-cross-root', 'a block without a coherence epoch must carry all-zero roots');
  } else {
    if (b.coherenceEpoch > b.height) throw new HeaderError('bad-cross-root', 'coherence tuple for a future epoch');
    if (b.crossRoot !== crossRootOf(b.evmRoot, b.ipfsRoot, b.sleevesRoot))
      throw new HeaderError('bad-cross-root', 'crossRoot does not recompute from the tuple');
  }
}
