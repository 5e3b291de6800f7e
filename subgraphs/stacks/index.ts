// The stacks context's door: a stack's identity (keys, CPV, binding, the identity NFT), its
// episodic head and its reads. Everything outside subgraphs/stacks/ imports the context from here
// and nowhere else.
export {
  createStack, getStackRow, lockStack, stackView, listStacks, stackMasterSecret, setEpisodicHead,
  STACK_KINDS, CPV_KEYS, type StackKind, type Cpv, type CreateStackInput, type StackView, type StackRow,
} from './stacks.ts';
export { registrationFile, registrationUrl, didKey, REGISTRATION_TYPE, SUPPORTED_TRUST, type RegistrationFile } from './registration.ts';

export const loadResolvers = async () => (await import('./resolvers.ts')).resolvers;
