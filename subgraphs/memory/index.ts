// The memory context's door: the Hippocampus DAG store (content-addressed, epoch-gated, encrypted
// nodes), perceive / remember / recall, shadow branches and the DHF compositor. Everything outside
// subgraphs/memory/ imports the context from here and nowhere else.
export {
  reconstruct,
  openBranches,
  mergeBranch,
  mergeBranches,
  checkDepth,
  checkText,
  fidelityOf,
  sealNode,
  sealNodeWith,
  shadowBranchesPart,
  isShadowWrite,
  newBranchId,
  PIN_COST_MILLI,
  PERCEIVE_COST_MILLI,
  RECALL_LEVEL_COST_MILLI,
  PERCEIVE_DRIFT_MILLI,
  RECALL_DRIFT_MILLI,
  MAX_TEXT_BYTES,
  type ReconstructResult,
  type Fragment,
  type BranchRow,
  type SealedNode,
} from './memory.ts';
export { dhfReconstruct } from './dhf/reconstruct.ts';
export { hippocampusClient, httpHippocampus, localHippocampus, type HippocampusClient, type NodeMeta } from './hippocampus/client.ts';
export {
  writeEpochsOf,
  writeEpochsSql,
  pruneForgotten,
  pruneBatchQuery,
  isReadable,
  indexNodesPart,
  nodePinState,
  pinNodePart,
  pinStored,
  walkChainSql,
  GATING_WINDOW,
  MAX_WALK_DEPTH,
  type DagNode,
  type WalkResult,
} from './hippocampus/store.ts';
export { computeCid, parseCid, payloadKey, CID_RE } from './hippocampus/cid.ts';
export { checkPinnedShards } from './shards.ts';

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
export const services = {
  hippocampus: async () => (await import('./hippocampus/service.ts')).startHippocampus,
  dhf: async () => (await import('./dhf/service.ts')).startDhf,
};
