// What a valid proof is, per residue kind, checked against real state (never trusted):
//   stale-ordering           {}                 the sleeve has synced since the residue's syncEpoch, or is decommissioned
//   speculative-divergence   {mergeCid}         a readable node of the stack that descends (over links) from the branch head (and the main head, when recorded)
//   historical-non-canonical {sleeveId?}        a DHF reconstruct through that sleeve now scores fidelity >= COG_FIDELITY_MIN;
//                            {}                 or every CID reported broken is readable on Hippocampus again
//                            {txHashes}         (a Thalamus re-fold after a Cortex gap, evidence.source 'cortex') exactly
//                                               Cortex's confirmed suite transactions of the epoch, folding to the recorded canonical evmRoot
//                            {height}           (Medulla committed another tuple than the fold, evidence.source 'medulla')
//                                               a main-chain block at that height committing the Thalamus fold of the epoch
//                            {cids}             (writes committed after their epoch's fold, evidence.source 'hippocampus')
//                                               exactly the epoch's writes as Hippocampus serves them, in write order,
//                                               folding to the recorded canonical ipfsRoot
//   reorg-orphan             {height}           Medulla's main-chain block at that height commits the orphaned tuple
//   shard-loss               {}                 the lost CID is readable on Hippocampus again; for a Thalamus fold the
//                                               Hippocampus did not answer (evidence.source 'hippocampus', no CID): it
//                                               serves that epoch's writes again, each of them stored
//   routing-equivocation     {tuples: [a, b]}   two distinct tuples for the epoch, each signed by the operator's ed25519 key
//                                               (unsigned submissions, operator 'anonymous': the two Medulla recorded)
import { isHex, verify } from '../lib/crypto.ts';
import { internalClient, RpcError } from '../lib/internal-client.ts';
import type { Platform } from '../lib/platform.ts';
import { blockAtHeight, cortexTxSource, crossRootOf, evmRootOf, ipfsRootOf, tupleMessage, type CoherenceTuple } from '../subgraphs/chains/index.ts';
import { hippocampusClient } from '../subgraphs/memory/index.ts';
import type { ResidueFacts, ResidueProofs, Verdict } from '../subgraphs/residues/index.ts';
import { getSleeveRow } from '../subgraphs/sleeves/index.ts';
import { getStackRow } from '../subgraphs/stacks/index.ts';

const no = (reason: string): Verdict => ({ ok: false, reason });
const yes = (facts: Record<string, unknown>): Verdict => ({ ok: true, facts });

/** The bytes an operator signs for a coherence tuple: the Thalamus/Medulla format. */
export const coherenceTupleMessage = (t: CoherenceTuple) => tupleMessage(t);

/** DHF, over the kernel's internal client (the internal bearer token, 3 s, 503 when it does not answer). */
const dhf = (p: Platform) => internalClient({ name: 'DHF', baseUrls: p.config.urls.dhf, token: p.config.internalToken, timeoutMs: 3000 });

/** True when Hippocampus serves the node's payload to a reader at the current epoch. */
export async function cidReadable(p: Platform, cid: string): Promise<boolean> {
  const hippo = hippocampusClient(p);
  const walk = await hippo.walk(cid, 1, p.epochs.current());
  // Served by a walk (which may answer from its payload cache) and stored (the store's word).
  return walk.nodes.some((n) => n.cid === cid) && !!(await hippo.meta(cid))?.stored;
}

async function dagNode(p: Platform, cid: string): Promise<{ links: string[]; stackId?: string } | null> {
  if (!(await cidReadable(p, cid))) return null;
  return hippocampusClient(p).meta(cid);
}

/** Medulla's main-chain block at a height, or null when it has none (its RPC error answer). */
async function medullaBlock(p: Platform, height: number): Promise<Record<string, unknown> | null> {
  try {
    return (await blockAtHeight(p, height)) as unknown as Record<string, unknown>;
  } catch (e) {
    if (e instanceof RpcError) return null;
    throw e;
  }
}

const str = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 512;

async function staleOrdering(p: Platform, r: ResidueFacts): Promise<Verdict> {
  const sleeveId = (r.evidence.sleeveId as string) ?? r.sleeveId;
  if (!str(sleeveId)) return no('the residue names no sleeve');
  const s = await getSleeveRow(p.db.prisma, sleeveId);
  const since = Number(r.evidence.syncEpoch ?? -1);
  if (!s.alive) return yes({ sleeveId, alive: false });
  if (s.syncEpoch > since && s.syncEpoch >= r.epoch) return yes({ sleeveId, syncEpoch: s.syncEpoch });
  return no(`sleeve ${sleeveId} has not synced since epoch ${since} (syncEpoch ${s.syncEpoch})`);
}

/** CIDs reachable from root over links (links are metadata, never gated), bounded. */
async function ancestry(p: Platform, root: string, limit = 256): Promise<Set<string>> {
  const hippo = hippocampusClient(p);
  const seen = new Set<string>([root]);
  let level = [root];
  while (level.length && seen.size < limit) {
    const next: string[] = [];
    for (const cid of level) {
      const m = await hippo.meta(cid);
      for (const l of m?.links ?? []) if (!seen.has(l)) seen.add(l), next.push(l);
    }
    level = next;
  }
  return seen;
}

async function speculativeDivergence(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  if (!str(proof.mergeCid)) return no('proof.mergeCid (the node that merges the branch) is required');
  const heads = [r.evidence.headCid, r.evidence.mainHeadCid].filter(str);
  if (!heads.length) return no('the residue records no branch heads');
  const node = await dagNode(p, proof.mergeCid);
  if (!node) return no(`node ${proof.mergeCid} is not readable on Hippocampus`);
  if (r.stackId && node.stackId && node.stackId !== r.stackId) return no('the merge node belongs to another stack');
  const reach = await ancestry(p, proof.mergeCid);
  const missing = heads.filter((h) => !reach.has(h));
  if (missing.length) return no(`the merge node does not descend from ${missing.join(', ')}`);
  return yes({ mergeCid: proof.mergeCid, links: node.links });
}

/** A Thalamus fold that missed Cortex: the proof is the epoch's canonical transaction set, checked against Cortex. */
async function evmRefoldProof(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  const canonical = (r.evidence.canonical ?? {}) as { evmRoot?: unknown };
  const epoch = Number(r.evidence.epoch ?? r.epoch);
  if (!isHex(canonical.evmRoot, 32)) return no('the residue records no canonical evmRoot');
  const list = proof.txHashes;
  if (!Array.isArray(list) || list.length > 100_000) return no("proof.txHashes (the epoch's Cortex transaction hashes) is required");
  const norm = list.map((h) => (typeof h === 'string' ? h.replace(/^0x/i, '').toLowerCase() : ''));
  if (!norm.every((h) => isHex(h, 32))) return no('proof.txHashes must be 32-byte hex transaction hashes');
  if (evmRootOf(norm) !== canonical.evmRoot) return no(`proof.txHashes do not fold to the canonical evmRoot ${String(canonical.evmRoot)}`);
  const onCortex = new Set((await cortexTxSource(p).txHashesForEpoch(epoch)).map((h) => h.replace(/^0x/i, '').toLowerCase()));
  const given = new Set(norm);
  const missing = [...onCortex].filter((h) => !given.has(h));
  const extra = [...given].filter((h) => !onCortex.has(h));
  if (missing.length || extra.length)
    return no(`proof.txHashes differ from Cortex's confirmed transactions of epoch ${epoch} (${missing.length} missing, ${extra.length} not on Cortex)`);
  return yes({ epoch, evmRoot: canonical.evmRoot, txs: given.size });
}

/** Writes that committed after their epoch's fold: the proof is the epoch's writes, checked against Hippocampus. */
async function lateWritesProof(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  const canonical = (r.evidence.canonical ?? {}) as { ipfsRoot?: unknown };
  const epoch = r.evidence.epoch;
  if (!isHex(canonical.ipfsRoot, 32) || typeof epoch !== 'number') return no('the residue records no canonical ipfsRoot');
  const list = proof.cids;
  if (!Array.isArray(list) || list.length > 100_000 || !list.every(str)) return no("proof.cids (the epoch's CIDs in write order) is required");
  if (ipfsRootOf(list) !== canonical.ipfsRoot) return no(`proof.cids do not fold to the canonical ipfsRoot ${canonical.ipfsRoot}`);
  // A Hippocampus that does not answer is a 503 (try again later), not a wrong proof.
  const served = await hippocampusClient(p).epochWrites(epoch);
  if (served.length !== list.length || served.some((c, i) => c !== list[i]))
    return no(`proof.cids differ from Hippocampus's writes of epoch ${epoch} (${served.length} served, ${list.length} given)`);
  return yes({ epoch, ipfsRoot: canonical.ipfsRoot, writes: list.length });
}

async function historicalNonCanonical(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  if (r.evidence.source === 'cortex') return evmRefoldProof(p, r, proof);
  if (r.evidence.source === 'hippocampus') return lateWritesProof(p, r, proof);
  if (r.evidence.source === 'medulla') return foldCommittedProof(p, r, proof);
  if (proof.sleeveId !== undefined) {
    if (!str(proof.sleeveId)) return no('proof.sleeveId must be a sleeve id');
    if (!r.stackId) return no('the residue names no stack');
    const res = await dhf(p).send('POST', '/v1/reconstruct', { stackId: r.stackId, sleeveId: proof.sleeveId, depth: Number(r.evidence.depth ?? 8) || 8 });
    const body = res.json as { fidelity?: number };
    if (res.status >= 300 || typeof body.fidelity !== 'number') return no(`reconstruct through ${proof.sleeveId} failed (${res.status})`);
    if (body.fidelity < p.config.fidelityMin) return no(`fidelity is still ${body.fidelity}, below ${p.config.fidelityMin}`);
    return yes({ sleeveId: proof.sleeveId, fidelity: body.fidelity });
  }
  const broken = (Array.isArray(r.evidence.broken) ? r.evidence.broken : []).filter(str);
  if (!broken.length) return no('name a sleeve (proof.sleeveId) whose reconstruct is canonical again');
  for (const cid of broken) if (!(await cidReadable(p, cid))) return no(`${cid} is still unreadable`);
  return yes({ readable: broken });
}

/** A foreign tuple was committed for the epoch: the proof is a main-chain block committing the fold after all. */
async function foldCommittedProof(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  const height = proof.height;
  if (typeof height !== 'number' || !Number.isInteger(height) || height < 0) return no('proof.height (a Medulla block height) is required');
  const folded = (r.evidence.folded ?? {}) as Record<string, unknown>;
  const epoch = r.evidence.epoch;
  if (!str(folded.crossRoot) || typeof epoch !== 'number') return no('the residue records no folded tuple');
  const block = await medullaBlock(p, height);
  if (!block) return no(`Medulla has no main-chain block at height ${height}`);
  if (block.coherenceEpoch !== epoch || block.crossRoot !== folded.crossRoot) return no(`block ${height} does not commit the Thalamus fold of epoch ${epoch}`);
  return yes({ height, blockHash: block.blockHash, crossRoot: folded.crossRoot });
}

async function reorgOrphan(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  const height = proof.height;
  if (typeof height !== 'number' || !Number.isInteger(height) || height < 0) return no('proof.height (a Medulla block height) is required');
  const crossRoot = r.evidence.crossRoot;
  if (!str(crossRoot)) return no('the residue records no orphaned tuple');
  const block = await medullaBlock(p, height);
  if (!block) return no(`Medulla has no main-chain block at height ${height}`);
  if (block.crossRoot !== crossRoot) return no(`block ${height} does not commit crossRoot ${crossRoot}`);
  if (block.blockHash === r.evidence.detachedHash) return no(`block ${height} is the detached block itself`);
  const epoch = r.evidence.coherenceEpoch ?? r.evidence.epoch;
  if (typeof epoch === 'number' && typeof block.epoch === 'number' && block.epoch < epoch) {
    return no(`block ${height} is from epoch ${block.epoch}, before the anchor's epoch ${epoch}`);
  }
  return yes({ height, blockHash: block.blockHash, crossRoot });
}

/** Most writes of one epoch a shard-loss proof checks one by one. */
const MAX_EPOCH_WRITES_CHECKED = 4096;

async function shardLoss(p: Platform, r: ResidueFacts): Promise<Verdict> {
  const cid = r.evidence.cid;
  if (str(cid)) return (await cidReadable(p, cid)) ? yes({ cid, readable: true }) : no(`${cid} is still unreachable on Hippocampus`);
  const epoch = r.evidence.epoch;
  if (r.evidence.source !== 'hippocampus' || typeof epoch !== 'number' || !Number.isSafeInteger(epoch)) return no('the residue names no CID');
  // A Hippocampus that still does not answer is a 503 (try again later), not a wrong proof.
  const hippo = hippocampusClient(p);
  const cids = await hippo.epochWrites(epoch);
  if (cids.length > MAX_EPOCH_WRITES_CHECKED) return no(`epoch ${epoch} has ${cids.length} writes, more than a proof checks (${MAX_EPOCH_WRITES_CHECKED})`);
  // Checked 16 at a time (over HTTP in distributed mode, one call per write); the first missing one ends it.
  let next = 0;
  let missing: string | undefined;
  await Promise.all(
    Array.from({ length: Math.min(16, cids.length) }, async () => {
      while (missing === undefined && next < cids.length) {
        const c = cids[next++]!;
        if (!(await hippo.meta(c))?.stored) missing ??= c;
      }
    }),
  );
  if (missing) return no(`${missing} of epoch ${epoch} is not stored on Hippocampus`);
  return yes({ epoch, writes: cids.length, ipfsRoot: ipfsRootOf(cids) });
}

const ROOTS = ['crossRoot', 'evmRoot', 'ipfsRoot', 'sleevesRoot'] as const;

/**
 * Two distinct tuples for the epoch from the residue's operator: signed by its key, or, for the
 * spec's unsigned submitcoherenceroot (operator 'anonymous'), the two tuples Medulla recorded
 * (their crossRoots are in the evidence, and each must recompute from its roots).
 */
function routingEquivocation(r: ResidueFacts, proof: Record<string, unknown>): Verdict {
  const operator = r.evidence.operator;
  const epoch = Number(r.evidence.epoch ?? r.epoch);
  const anonymous = operator === 'anonymous';
  if (!anonymous && !isHex(operator, 32)) return no('the residue names no operator key');
  const tuples = proof.tuples;
  if (!Array.isArray(tuples) || tuples.length !== 2) return no(`proof.tuples must hold exactly two ${anonymous ? '' : 'signed '}tuples`);
  for (const [i, t] of tuples.entries()) {
    const tt = t as Record<string, unknown>;
    if (!tt || typeof tt !== 'object' || tt.epoch !== epoch) return no(`tuple ${i} is not for epoch ${epoch}`);
    for (const k of ROOTS) if (!isHex(tt[k], 32)) return no(`tuple ${i}: ${k} must be 64 hex chars`);
    if (anonymous) {
      if (crossRootOf(tt.evmRoot as string, tt.ipfsRoot as string, tt.sleevesRoot as string) !== tt.crossRoot)
        return no(`tuple ${i}: crossRoot does not recompute from its roots`);
      continue;
    }
    if (!isHex(tt.signature, 64)) return no(`tuple ${i}: signature must be 128 hex chars`);
    const msg = coherenceTupleMessage(tt as never);
    if (!verify(tt.signature as string, msg, operator as string)) return no(`tuple ${i} is not signed by operator ${String(operator)}`);
  }
  const [a, b] = tuples as Record<string, string>[];
  if (ROOTS.every((k) => a![k] === b![k])) return no('the two tuples are the same');
  if (anonymous) {
    const recorded = (Array.isArray(r.evidence.crossRoots) ? r.evidence.crossRoots : []) as unknown[];
    if (!recorded.includes(a!.crossRoot) || !recorded.includes(b!.crossRoot) || a!.crossRoot === b!.crossRoot) {
      return no('the two tuples must be the two unsigned submissions Medulla recorded for the epoch');
    }
  }
  return yes({ operator, epoch, crossRoots: [a!.crossRoot, b!.crossRoot] });
}

export async function checkProof(p: Platform, r: ResidueFacts, proof: Record<string, unknown>): Promise<Verdict> {
  switch (r.kind) {
    case 'stale-ordering':
      return staleOrdering(p, r);
    case 'speculative-divergence':
      return speculativeDivergence(p, r, proof);
    case 'historical-non-canonical':
      return historicalNonCanonical(p, r, proof);
    case 'reorg-orphan':
      return reorgOrphan(p, r, proof);
    case 'shard-loss':
      return shardLoss(p, r);
    case 'routing-equivocation':
      return routingEquivocation(r, proof);
    default:
      return no(`unknown residue kind ${String(r.kind)}`);
  }
}

/** The residues context's port (p.ports.residueProofs): a claimant is a stack; a proof is checked against real state. */
export const residueProofs: ResidueProofs = {
  requireClaimant: async (p, stackId) => void (await getStackRow(p.db.prisma, stackId)),
  check: checkProof,
};
