// The residues context's door: coordination failures as bounty-carrying records, their proofs and
// their lifecycle (open, resolved, expired). Everything outside subgraphs/residues/ imports the
// context from here and nowhere else.
// Its gauges at /metrics, registered when the door is first imported (every process imports it through bin/assembly.ts).
import './metrics.ts';
export {
  openResidue,
  openResidueNow,
  openResiduesPart,
  residueView,
  RESIDUE_BOUNTY,
  RESIDUE_KINDS,
  type ResidueKind,
  type ResidueRecord,
  type OpenResidue,
} from './open.ts';
export {
  listResidues,
  getResidue,
  getResidueRow,
  submitProof,
  expireResidues,
  expireBatchQuery,
  residuesDueRead,
  EXPIRY_BATCH,
  residueChainRecords,
  invalidProof,
  RESIDUE_LIST_LIMIT,
  type ProofSubmission,
} from './residues.ts';

export type { ResidueFacts, ResidueProofs, Verdict } from './proof-port.ts';

export type { Pass, PassResult } from './worker/pass-port.ts';

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
export const services = {
  worker: async () => (await import('./worker/service.ts')).startWorker,
};
