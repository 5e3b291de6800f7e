// The stacks context's door: a stack's identity (keys, CPV, binding, the identity NFT), its
// episodic head and its reads. Everything outside subgraphs/stacks/ imports the context from here
// and nowhere else.
export {
  createStack,
  getStackRow,
  lockStack,
  markStackActive,
  spendLockPart,
  stackReadSql,
  stackCore,
  stackCores,
  lastActiveEpochsOf,
  listStackRows,
  stacksInTokenOrderRead,
  stacksByIdRead,
  stackMasterSecret,
  setEpisodicHead,
  headMovePart,
  writeStackRead,
  type WriteStack,
  HeadMoved,
  existingStackIds,
  stackPubKey,
  stackChainRecords,
  STACK_KINDS,
  CPV_KEYS,
  type StackKind,
  type Cpv,
  type CreateStackInput,
  type StackCore,
  type CreatedStack,
  type StackRow,
  type StackListRow,
  type StackReadRow,
} from './stacks.ts';

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
