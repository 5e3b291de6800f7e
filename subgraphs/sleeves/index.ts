// The sleeves context's door: a stack's bodies (spawn, sync, drift, freeze, decommission), the
// sleeve runtime's tick loops and the needlecast saga that moves a stack between sleeves.
// Everything outside subgraphs/sleeves/ imports the context from here and nowhere else.
// Its gauges at /metrics, registered when the door is first imported (every process imports it through bin/assembly.ts).
import './metrics.ts';
export {
  spawnSleeve,
  getSleeveRow,
  listAliveSleeves,
  sleeveLeafChanges,
  staleSleevesQuery,
  listStaleSleeves,
  staleSleevesRead,
  markStaleReported,
  listAliveSleevesOverDrift,
  overDriftQuery,
  driftBandOf,
  aliveSleeveTotals,
  aliveSleeveTotalsRead,
  listAliveSleeveViews,
  getSleeveView,
  requireActiveSleeve,
  requireSleeveOfStack,
  addDrift,
  decommissionInTx,
  decommissionSleeve,
  syncSleeve,
  freezeSleeve,
  unfreezeSleeve,
  stackTokenTotals,
  desyncedSleeves,
  richestMemorySleeve,
  richestMemoryPayer,
  richestPayerSql,
  spendForRead,
  spendWithParts,
  flagSleeve,
  sleeveChainRecords,
  defaultTickRate,
  sleeveView,
  spendFromSleeve,
  stacksOfSleeves,
  requireKeyLease,
  sleeveWritesPart,
  writeSleevesRead,
  type WriteSleeve,
  SleevesNotActive,
  stackOfSleeve,
  writeRefusal,
  recordSleeveRead,
  sleevesOfStacks,
  sleevesOfStacksRead,
  aliveSleeveAccountsSql,
  sleeveRowsOfStacksRead,
  SLEEVE_KINDS,
  INITIAL_TOKENS,
  MAX_TICK_RATE_MS,
  MIN_TICK_RATE_MS,
  type SleeveKind,
  type SpawnInput,
  type SleeveRow,
  type SleeveLeafRow,
  type StaleSleeve,
  type SleeveView,
} from './sleeves.ts';
export { callRouter, routerRequest, problemFromRouter, type GatewayNeedlecastRequest } from './needlecast/client.ts';
export { shapeA, shapeB, sagaView, type SagaView, type StepRecord } from './needlecast/view.ts';
export { STEP_NAMES, type StepName } from './needlecast/steps.ts';
export { completedSagaShards, completedSagaShardsRead, type SagaShards } from './needlecast/shards.ts';
export type { SleeveMemory, DagNodeMeta } from './memory-port.ts';
import type { SagaOptions } from './needlecast/saga.ts';
export type { SagaOptions };

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
export const services = {
  needlecast: async (saga?: SagaOptions) => (await import('./needlecast/service.ts')).needlecastStarter(saga),
  sleeveRuntime: async () => (await import('./runtime/service.ts')).startSleeveRuntime,
};
