// The economy context's door: the double-entry ledger of the five tokens, the Treasury (emission,
// claims, slashing) and the Bandwidth Faucet. Everything outside subgraphs/economy/ imports the
// context from here and nowhere else.
export {
  TOKENS,
  CORE_TOKENS,
  SYSTEM,
  sleeveAccount,
  poolAccount,
  claimableAccount,
  toMilli,
  fromMilli,
  zeroAmounts,
  addAmounts,
  post,
  transfer,
  mint,
  burn,
  balanceMilliSql,
  sleeveAccountSql,
  burnManyPart,
  mintPart,
  balancesFromOutput,
  balancesMilliRead,
  holderTotalsRead,
  BalancesShort,
  sweepPart,
  sweptUnitsSql,
  balanceOf,
  balancesOf,
  systemBalance,
  type Token,
  type TokenAmounts,
  type Move,
  type Leg,
  type Posting,
  type BurnInput,
} from './ledger.ts';
export {
  emitEpoch,
  issuance,
  claim,
  claimableOf,
  stackBalancesB,
  ebcFactor,
  EMISSION_PER_EPOCH,
  type EmissionEvent,
  type ClaimResult,
  type StackBalancesB,
  type CoreAmounts,
} from './treasury.ts';
export { balanceHistoryOf } from './history.ts';
export {
  markActive,
  markActivePart,
  activeInPart,
  openAccrual,
  openAccrualPart,
  lastActiveEpochs,
  lastActiveEpochsRead,
  NEVER_ACTIVE,
  tailSql,
  type AccrualTerms,
} from './accrual.ts';
export { watchEmissions, type EmissionWatchHandle } from './watch.ts';
export { drip, DRIP_UNITS, type FaucetGrant } from './faucet.ts';
export type { StackHolders, StackTerms } from './holders.ts';
export { faucetRoutes } from './faucet/routes.ts';
export { treasuryRoutes, StackIdSchema, StackIdParams, StackIdBody } from './treasury/routes.ts';

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
export const services = {
  treasury: async () => (await import('./treasury/service.ts')).startTreasury,
  faucet: async () => (await import('./faucet/service.ts')).startFaucet,
};
