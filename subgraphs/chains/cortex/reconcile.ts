// Drift between the database and Cortex: confirmed intents whose effect is not on the chain, token
// supplies that do not mirror the confirmed mints and burns, rows stuck or failed. Reported, not repaired.
// Balances and supplies are read at the block of the newest confirmed row: the chain as the
// confirmed settlements left it, so a settlement mined but not yet recorded is no drift.
import { Contract } from 'ethers';
import type { Db } from '../../../lib/db/index.ts';
import type { Platform } from '../../../lib/platform.ts';
import { artifact, CHAIN_TOKENS } from './artifacts.ts';
import { amountsToChain, ownerAddress, recordKey } from './calls.ts';
import { tokenIdResolver, type CortexChain } from './submitter.ts';

export interface Drift {
  kind: 'identity' | 'sleeve' | 'residue' | 'anchor' | 'balance' | 'supply' | 'settlement' | 'stuck' | 'failed';
  ref: string;
  detail: string;
}

export interface ReconcileOptions {
  /** Rows pending or submitted for longer than this count as stuck. */
  stuckAfterMs?: number;
}

/** reconcile over the running Cortex service of this process (p.local 'cortex'); logs a warning on drift. */
export async function reconcile(p: Platform, opts: ReconcileOptions = {}): Promise<Drift[]> {
  const cortex = p.local.get('cortex') as { chain: CortexChain } | undefined;
  if (!cortex) throw new Error('cortex service is not running in this process');
  const drift = await reconcileChain(p.db.prisma, cortex.chain, opts);
  if (drift.length) p.log.warn({ drift: drift.slice(0, 20), count: drift.length }, 'cortex: database and chain disagree');
  return drift;
}

export async function reconcileChain(db: Db, chain: CortexChain, opts: ReconcileOptions = {}): Promise<Drift[]> {
  const drift: Drift[] = [];
  const c = (name: Parameters<typeof artifact>[0], addr: string) => new Contract(addr, artifact(name).abi, chain.provider);
  const { contracts } = chain.suite;
  const identity = c('StackIdentity', contracts.StackIdentity);
  const sleeves = c('SleeveRegistry', contracts.SleeveRegistry);
  const residues = c('ResidueRegistry', contracts.ResidueRegistry);
  const anchors = c('EpochAnchor', contracts.EpochAnchor);
  const bandwidth = c('BandwidthToken', contracts.BandwidthToken);
  const tokenIdOf = tokenIdResolver(db);

  const confirmed = await db.chainOutbox.findMany({ where: { status: 'confirmed' }, orderBy: { id: 'asc' } });
  const pay = (r: (typeof confirmed)[number]) => r.payload as Record<string, unknown>;

  const checks: Promise<void>[] = [];
  const sleeveFinal = new Map<string, boolean>();
  const expectedBalance = new Map<string, bigint>(); // `${tokenId}:${token}`
  const supply = CHAIN_TOKENS.map(() => 0n);
  const settlements: bigint[] = [];
  let lastBlock = -1;
  for (const row of confirmed) {
    if (row.blockNumber !== null && row.blockNumber > lastBlock) lastBlock = row.blockNumber;
    const p = pay(row);
    switch (row.kind) {
      case 'mintIdentity':
        checks.push(
          (async () => {
            const want = ownerAddress(p.owner, chain.suite.operator);
            const owner = (await identity.ownerOf(p.tokenId).catch(() => undefined)) as string | undefined;
            if (owner !== want)
              drift.push({ kind: 'identity', ref: String(p.stackId), detail: `ownerOf(${p.tokenId}) is ${owner ?? 'nobody'}, expected ${want}` });
          })(),
        );
        break;
      case 'spawnSleeve':
        sleeveFinal.set(String(p.sleeveId), true);
        break;
      case 'decommissionSleeve':
        sleeveFinal.set(String(p.sleeveId), false);
        break;
      case 'claimResidue':
        checks.push(
          (async () => {
            const r = (await residues.residueOf(recordKey(String(p.residueId)))) as { status: bigint; bountyMilli: bigint; claimantTokenId: bigint };
            if (Number(r.status) !== 2) drift.push({ kind: 'residue', ref: String(p.residueId), detail: 'claimed in the database, not on Cortex' });
            const k = `${r.claimantTokenId}:4`;
            expectedBalance.set(k, (expectedBalance.get(k) ?? 0n) + r.bountyMilli);
            supply[4] += r.bountyMilli;
          })(),
        );
        break;
      case 'anchor':
        checks.push(
          (async () => {
            const ok = (await anchors.verify(p.epoch, `0x${String(p.crossRoot).replace(/^0x/, '')}`)) as boolean;
            if (!ok) drift.push({ kind: 'anchor', ref: `epoch:${p.epoch}`, detail: 'anchor not verifiable on Cortex' });
          })(),
        );
        break;
      case 'settle':
        settlements.push(row.id);
        break;
      case 'mint':
      case 'burn': {
        const t = await tokenIdOf(String(p.stackId));
        const { kinds, values } = amountsToChain(p.amounts);
        kinds.forEach((k, i) => {
          const key = `${t}:${k}`;
          const v = row.kind === 'mint' ? values[i] : -values[i];
          expectedBalance.set(key, (expectedBalance.get(key) ?? 0n) + v);
          supply[k] += v;
        });
        break;
      }
    }
  }
  for (const [sleeveId, alive] of sleeveFinal) {
    checks.push(
      (async () => {
        const onChain = (await sleeves.isAlive(recordKey(sleeveId))) as boolean;
        if (onChain !== alive) drift.push({ kind: 'sleeve', ref: sleeveId, detail: `alive on Cortex is ${onChain}, expected ${alive}` });
      })(),
    );
  }
  // The newest settlements are on chain, each once (an older one missing shows in the balances).
  for (const id of settlements.slice(-100)) {
    checks.push(
      (async () => {
        if (!((await bandwidth.settled(id)) as boolean))
          drift.push({ kind: 'settlement', ref: `settlement:${id}`, detail: 'confirmed in the database, not on Cortex' });
      })(),
    );
  }
  await Promise.all(checks);
  const head = await chain.provider.getBlockNumber();
  const at = { blockTag: lastBlock >= 0 && lastBlock <= head ? lastBlock : head };
  await Promise.all(
    [...expectedBalance].map(async ([key, want]) => {
      const [tokenId, token] = key.split(':').map(Number);
      const have = (await bandwidth.balanceOf(tokenId, token, at)) as bigint;
      if (have !== want) drift.push({ kind: 'balance', ref: `token:${tokenId}:${CHAIN_TOKENS[token]}`, detail: `Cortex ${have}, database ${want} (milli)` });
    }),
  );
  await Promise.all(
    CHAIN_TOKENS.map(async (t, i) => {
      const erc20 = c('CortexToken', chain.suite.tokens[t]);
      const have = (await erc20.totalSupply(at)) as bigint;
      if (have !== supply[i]) drift.push({ kind: 'supply', ref: t, detail: `totalSupply ${have}, confirmed mints minus burns ${supply[i]} (milli)` });
    }),
  );
  const stuckBefore = new Date(Date.now() - (opts.stuckAfterMs ?? 60_000));
  const open = await db.chainOutbox.findMany({ where: { status: { in: ['pending', 'submitted'] }, createdAt: { lt: stuckBefore } }, take: 100 });
  for (const r of open) drift.push({ kind: 'stuck', ref: r.ref, detail: `${r.kind} ${r.status} since ${r.createdAt.toISOString()}` });
  const failed = await db.chainOutbox.findMany({ where: { status: 'failed' }, orderBy: { id: 'desc' }, take: 100 });
  for (const r of failed) drift.push({ kind: 'failed', ref: r.ref, detail: `${r.kind}: ${r.lastError ?? 'failed'}` });
  return drift;
}

export { cortexTxSource } from './tx-source.ts';
