// Talking to other Medulla nodes: announce our blocks, fetch a peer's branch back to a block we
// know, and poll peers' tips so a missed announcement (or a healed partition) still converges.
// Every call carries the internal token (Medulla's RPC is internal).
import type { Logger } from '../../../lib/log.ts';
import { getInfo, medullaRpc } from './client.ts';
import type { Block } from './header.ts';
import type { Chain } from './chain.ts';
import { HeaderError, parseBlock } from './validate.ts';

/** A peer's branch longer than this is not followed in one sync. */
export const MAX_BRANCH = 5000;
const BATCH = 100;

export async function announce(peers: readonly string[], block: Block, self: string, log: Logger, token?: string): Promise<void> {
  await Promise.all(
    peers.map((peer) =>
      medullaRpc(peer, 'submitblock', [block, self], { timeoutMs: 2000, token }).catch((e) =>
        log.debug({ peer, err: (e as Error).message }, 'announce failed'),
      ),
    ),
  );
}

/** Fetches the blocks between `hash` (a block of `peer`) and our chain, oldest first. */
export async function fetchBranch(chain: Chain, peer: string, hash: string, token?: string): Promise<Block[]> {
  const branch: Block[] = [];
  let want = hash;
  while (!(await chain.has(want))) {
    if (branch.length >= MAX_BRANCH) throw new Error(`peer branch longer than ${MAX_BRANCH} blocks`);
    const b = parseBlock(await medullaRpc(peer, 'getblockbyhash', [want], { timeoutMs: 3000, token }));
    if (b.blockHash !== want) throw new HeaderError('bad-hash', 'peer returned a different block');
    branch.unshift(b);
    want = b.prevHash;
    if (b.height === 0 || (await chain.has(want, b.height - 1))) break;
    // Bulk: the peer's main chain below b, if it still links up to b.
    const from = Math.max(0, b.height - BATCH);
    const batch = ((await medullaRpc<unknown[]>(peer, 'getheaders', [from, b.height - from], { timeoutMs: 5000, token })) ?? []).map(parseBlock);
    for (let i = batch.length - 1; i >= 0 && !(await chain.has(want, batch[i].height)); i--) {
      if (batch[i].blockHash !== want) break;
      branch.unshift(batch[i]);
      want = batch[i].prevHash;
    }
  }
  return branch;
}

/** Follows `hash` from `peer`: fetches and accepts its branch. Returns how many blocks were new. */
export async function syncFrom(chain: Chain, peer: string, hash: string, token?: string): Promise<number> {
  if (await chain.has(hash)) return 0;
  const branch = await fetchBranch(chain, peer, hash, token);
  let added = 0;
  for (const b of branch) {
    const r = await chain.accept(b);
    if (r.status !== 'known') added++;
  }
  return added;
}

/** One round of polling: for each peer whose tip we do not know, sync from it. */
export async function pollPeers(chain: Chain, peers: readonly string[], log: Logger, onNew: () => void, token?: string): Promise<void> {
  for (const peer of peers) {
    try {
      const info = await getInfo(peer, { timeoutMs: 2000, token });
      if (typeof info?.tip !== 'string' || (await chain.has(info.tip))) continue;
      if (await syncFrom(chain, peer, info.tip, token)) onNew();
    } catch (e) {
      log.debug({ peer, err: (e as Error).message }, 'peer poll failed');
    }
  }
}
