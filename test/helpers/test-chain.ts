// A throwaway Cortex for tests and benchmarks: anvil on a free port, the suite deployed into a temp dir.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Contract, Wallet, type JsonRpcProvider } from 'ethers';
import { startAnvil, type Anvil, type AnvilOptions } from '../../subgraphs/chains/cortex/anvil.ts';
import { ANVIL_DEV_KEY, ensureSuite, providerFor, type Deployment } from '../../subgraphs/chains/cortex/deploy.ts';
import { artifact, type SuiteName } from '../../subgraphs/chains/cortex/artifacts.ts';
import type { CortexChain } from '../../subgraphs/chains/cortex/submitter.ts';

/** anvil's second dev account: holds no role on the suite. */
export const STRANGER_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';

export interface TestChain extends CortexChain {
  anvil: Anvil;
  file: string;
  operator: Wallet;
  stranger: Wallet;
  contract(name: SuiteName, runner?: Wallet): Contract;
  /** Another suite on the same node (isolates a test's supplies and ids). */
  freshSuite(): Promise<TestChain>;
  close(): Promise<void>;
}

export async function startTestChain(o: Partial<AnvilOptions> = {}): Promise<TestChain> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-cortex-'));
  const anvil = await startAnvil({ port: 0, chainId: 131072, ...o });
  const provider: JsonRpcProvider = providerFor(anvil.url, 100);
  const operator = new Wallet(ANVIL_DEV_KEY, provider);
  const stranger = new Wallet(STRANGER_KEY, provider);
  let n = 0;
  const deploy = async (): Promise<TestChain> => {
    const file = path.join(dir, `suite-${n++}`, 'deployments', '131072.json');
    const suite: Deployment = (await ensureSuite(provider, ANVIL_DEV_KEY, file)).deployment;
    const view: TestChain = {
      anvil,
      file,
      provider,
      suite,
      chainId: 131072,
      wallet: operator,
      operator,
      stranger,
      contract: (name, runner = operator) => new Contract(suite.contracts[name], artifact(name).abi, runner),
      freshSuite: deploy,
      close: async () => {
        if (view === first) {
          provider.destroy();
          await anvil.close();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      },
    };
    return view;
  };
  const first = await deploy();
  return first;
}
