// The embedded Cortex node: anvil (npm @foundry-rs/anvil, binary in its platform package) as a
// child process. It runs under a tiny sh watchdog that reads our stdin: when this process dies the
// pipe closes and the watchdog stops anvil, so no orphan keeps the port.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Config } from '../../../lib/config.ts';
import { jsonRpc as rpc } from '../../../lib/json-rpc.ts';

const require = createRequire(import.meta.url);

export const CORTEX_CHAIN_ID = 131072;

export interface AnvilOptions {
  /** 0 picks a free port. */
  port: number;
  host?: string;
  chainId?: number;
  /** Seconds between blocks; 0 = mine each transaction at once (automine). */
  blockTime?: number;
  /** Interval mining plus a block per transaction (fast tests). */
  mixedMining?: boolean;
  /** State file (loaded at start when present, written every stateInterval s and on exit). */
  statePath?: string;
  stateInterval?: number;
  /** Disable all mining (tests mine by hand with evm_mine). */
  noMining?: boolean;
}

export interface Anvil {
  url: string;
  port: number;
  child: ChildProcess;
  close(): Promise<void>;
}

/** The platform's own anvil (no COG_CORTEX_RPC_URL), as Cortex starts it. */
export function cortexAnvilOptions(c: Config): AnvilOptions {
  return {
    port: c.ports.cortex,
    host: '127.0.0.1',
    chainId: CORTEX_CHAIN_ID,
    blockTime: c.cortex.blockTimeS,
    statePath: path.join(c.dataDir, 'cortex', 'state.json'),
    stateInterval: 5,
  };
}

let early: { key: string; anvil: Promise<Anvil> } | undefined;

/**
 * Starts the platform's anvil ahead of Cortex's start: the launcher calls it before the stores
 * open, so anvil loads its state on the other core while this process loads its modules and opens
 * its database (Cortex's start, which the Thalamus waits for, otherwise began with anvil's own
 * start). Cortex takes it (takeEarlyAnvil); a process that stops first ends it with its own exit
 * (the watchdog).
 */
export function startAnvilEarly(o: AnvilOptions): void {
  if (early) return;
  const anvil = startAnvil(o);
  anvil.catch(() => {}); // Cortex's start starts its own then, and reports what fails
  early = { key: JSON.stringify(o), anvil };
}

/** The anvil startAnvilEarly started with these same options, handed out once. */
export function takeEarlyAnvil(o: AnvilOptions): Promise<Anvil> | undefined {
  if (!early || early.key !== JSON.stringify(o)) return undefined;
  const { anvil } = early;
  early = undefined;
  return anvil;
}

export function anvilBinary(): string {
  const pkg = `@foundry-rs/anvil-${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
  const bin = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
  if (!fs.existsSync(bin)) throw new Error(`anvil binary not found at ${bin}`);
  return bin;
}

const WATCHDOG = '"$@" & c=$!; trap \'kill -TERM $c 2>/dev/null\' TERM INT HUP; while read -r _; do :; done; kill -TERM $c 2>/dev/null; wait $c';

export { rpc };

/** Polls eth_chainId until the node answers. */
export async function waitForRpc(url: string, timeoutMs = 20_000): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return Number(await rpc<string>(url, 'eth_chainId', [], 1000));
    } catch (e) {
      if (Date.now() > until) throw new Error(`Cortex RPC ${url} did not answer: ${(e as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export async function startAnvil(o: AnvilOptions): Promise<Anvil> {
  const host = o.host ?? '127.0.0.1';
  const args = ['--port', String(o.port), '--host', host, '--chain-id', String(o.chainId ?? 131072)];
  if (o.noMining) args.push('--no-mining');
  else if (o.blockTime && o.blockTime > 0) args.push('--block-time', String(o.blockTime));
  if (o.mixedMining) args.push('--mixed-mining');
  if (o.statePath) {
    fs.mkdirSync(path.dirname(o.statePath), { recursive: true });
    args.push('--state', o.statePath, '--state-interval', String(o.stateInterval ?? 5));
  }
  const child = spawn('sh', ['-c', WATCHDOG, 'anvil-watchdog', anvilBinary(), ...args], { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`anvil did not start: ${output.slice(-500)}`)), 20_000);
    const onData = (b: Buffer) => {
      output += b.toString();
      const m = /Listening on [^\s:]+:(\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stdout!.resume(); // keep draining so anvil never blocks on a full pipe
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (b: Buffer) => void (output += b.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`anvil exited (${code}): ${output.slice(-500)}`));
    });
  });
  child.unref();
  (child.stdout as unknown as { unref?(): void }).unref?.();
  (child.stderr as unknown as { unref?(): void }).unref?.();
  (child.stdin as unknown as { unref?(): void }).unref?.();
  const url = `http://${host}:${port}`;
  await waitForRpc(url);
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    child,
    close() {
      closing ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        // Closing stdin makes the watchdog TERM anvil, which writes its state and exits.
        const kill = setTimeout(() => {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {
            /* already gone */
          }
        }, 5000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.stdin!.end();
      });
      return closing;
    },
  };
}
