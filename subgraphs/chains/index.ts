// The chains context's door: Medulla (the proof-of-work chain and its epochs), Cortex (the EVM, its
// contracts and the transaction outbox) and the Thalamus (the coherence root). Everything outside
// subgraphs/chains/ imports the context from here and nowhere else.
// Its gauges at /metrics, registered when the door is first imported (every process imports it through bin/assembly.ts).
import './metrics.ts';
import type { Config } from '../../lib/config.ts';
export { chainIntentsPart, computedIntentsPart, enqueueChainTx, newRecordIntentPart, newRecordsIntentPart, type ChainTxKind } from './outbox.ts';
export { enqueueFoldedAnchors, pendingAnchorsQuery, ANCHOR_BATCH } from './anchor-intents.ts';
export { anchorsOfEpochs, anchorsRead, ANCHOR_EPOCHS_WANTED, STACK_ANCHORS, type StackAnchor } from './anchors.ts';
export { currentEpochInfo, epochCurrentPart, mineBlockNow, blockAtHeight, newestStoredEpoch } from './epochs.ts';
export { crossRootOf, evmRootOf, ipfsRootOf, tupleMessage, computeRoots, type CoherenceTuple } from './thalamus/coherence.ts';
export { incrementalSleevesRoot, type IncrementalSleevesRoot, type SleeveLeaf, type SleeveLeafFeed } from './thalamus/sleeves-root.ts';
export { cortexTxSource } from './cortex/tx-source.ts';
// ERC-8004: the residue proof commitments on ResidueRegistry / ValidationRegistry, and the deployed suite.
export { proofHashOf, validationRequestHash, RESIDUE_PROOF_TAG } from './cortex/calls.ts';
export { CORTEX_CHAIN_ID, deploymentsFile, readDeployment, type Deployment } from './cortex/deploy.ts';
export { wireResidueOpener, type ChainResidue, type ResidueOpener } from './residue-port.ts';
export { wireMirroredTables, type ChainStatus, type MirroredTable, type MirroredTables, type StackHead, type StackHeads } from './record-port.ts';
export type { FoldSources, EvmTxSource, DagWriteSource, SleeveSource } from './thalamus/sources.ts';

/** Starts the platform's own anvil ahead of Cortex's start (the launcher calls it first); nothing when Cortex uses another node (COG_CORTEX_RPC_URL). */
export async function prestartCortex(c: Config): Promise<void> {
  if (c.cortexRpcUrl) return;
  const { cortexAnvilOptions, startAnvilEarly } = await import('./cortex/anvil.ts');
  startAnvilEarly(cortexAnvilOptions(c));
}
export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
export const services = {
  cortex: async () => (await import('./cortex/service.ts')).startCortex,
  medulla: async () => (await import('./medulla/service.ts')).startMedulla,
  thalamus: async () => (await import('./thalamus/service.ts')).startThalamus,
};
export const deployCommand: typeof import('./cortex/deploy.ts').deployCommand = async (...args) => (await import('./cortex/deploy.ts')).deployCommand(...args);
