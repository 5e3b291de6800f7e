// The memory context's door: the Hippocampus DAG store (content-addressed, epoch-gated, encrypted
// nodes), perceive / remember / recall, shadow branches and the DHF compositor. Everything outside
// subgraphs/memory/ imports the context from here and nowhere else.
export {
  perceive, remember, recall, pinNode, reconstruct, openBranches, mergeBranch, checkDepth, fidelityOf,
  PIN_COST_MILLI, PERCEIVE_COST_MILLI, MAX_TEXT_BYTES,
  type RecallResult, type PerceiveResult, type WriteResult, type ReconstructResult, type Fragment, type BranchRow,
} from './memory.ts';
export { hippocampusClient, httpHippocampus, localHippocampus, HIPPOCAMPUS_LOCAL, type HippocampusClient, type NodeMeta } from './hippocampus/client.ts';
export { writeEpochsOf, pruneForgotten, isReadable, GATING_WINDOW, MAX_WALK_DEPTH, type DagNode, type WalkResult } from './hippocampus/store.ts';
export { computeCid, parseCid, payloadKey, CID_RE } from './hippocampus/cid.ts';
export { checkPinnedShards } from './shards.ts';

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
export const services = {
  hippocampus: async () => (await import('./hippocampus/service.ts')).startHippocampus,
  dhf: async () => (await import('./dhf/service.ts')).startDhf,
};
