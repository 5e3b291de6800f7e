// The Bandwidth Faucet: 100 of each core token per drip, spread evenly over the stack's alive
// sleeves (into the pool when none is alive), at most one drip per cooldown per stack. The
// cooldown is a cache key set-if-absent, so it holds across several faucet processes on Redis.
import { tooManyRequests } from '../../lib/errors.ts';
import { recordEvent } from '../../lib/events.ts';
import type { Platform } from '../../lib/platform.ts';
import { holders } from './holders.ts';
import { CORE_TOKENS, SYSTEM, mint, poolAccount, sleeveAccount, toMilli } from './ledger.ts';
import type { CoreAmounts } from './treasury.ts';

export const DRIP_UNITS = 100;

export interface FaucetGrant {
  ok: boolean;
  granted: CoreAmounts;
  sleeves: string[];
}

export const faucetKey = (stackId: string) => `faucet:${stackId}`;

/** Integer milli split: even shares, the remainder to the first. */
export function splitMilli(total: bigint, n: number): bigint[] {
  const share = total / BigInt(n);
  const out = Array.from({ length: n }, () => share);
  out[0]! += total - share * BigInt(n);
  return out;
}

export async function drip(p: Platform, stackId: string): Promise<FaucetGrant> {
  await holders(p).stackTerms(p.db.prisma, stackId); // 404 before any cooldown is set
  const key = faucetKey(stackId);
  const cooldown = p.config.faucetCooldownMs;
  if (cooldown > 0 && !(await p.cache.setIfAbsent(key, String(Date.now()), cooldown))) {
    const left = await p.cache.ttl(key);
    const seconds = left > 0 ? left / 1000 : cooldown / 1000;
    throw tooManyRequests(`The faucet gives one drip per ${cooldown / 1000} s per stack; next drip in ${Math.ceil(seconds)} s`, Math.ceil(seconds));
  }
  const epoch = p.epochs.current();
  try {
    return await p.db.prisma.$transaction(async (tx) => {
      const ids = (await holders(p).aliveSleeveIds(tx, stackId)).sort();
      const accounts = ids.length ? ids.map(sleeveAccount) : [poolAccount(stackId)];
      const shares = splitMilli(toMilli(DRIP_UNITS), accounts.length);
      for (let i = 0; i < accounts.length; i++) {
        await mint(
          tx,
          accounts[i]!,
          CORE_TOKENS.map((token) => ({ token, milli: shares[i]! })),
          {
            reason: 'faucet',
            ref: `faucet:${stackId}`,
            epoch,
            stackId,
            from: SYSTEM.faucet,
          },
        );
      }
      const granted: CoreAmounts = { compute: DRIP_UNITS, memory: DRIP_UNITS, sync: DRIP_UNITS, routing: DRIP_UNITS };
      await recordEvent(tx, { subject: `cog.faucet.drip.${stackId}`, type: 'faucet.drip', data: { stackId, epoch, granted, sleeves: ids } });
      return { ok: true, granted, sleeves: ids };
    });
  } catch (e) {
    await p.cache.del(key).catch(() => {}); // nothing was granted: no cooldown either
    throw e;
  }
}
