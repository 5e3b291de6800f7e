// The start banner's progress on a terminal: a line as each stage begins (opening the stores,
// each service, each contract deployed) and as each service is up, with the time since start.
// Line by line rather than one line redrawn, so log lines printed meanwhile never garble it.
import { onProgress } from '../lib/progress.ts';

export interface StartProgress {
  stage(service: string, step: string): void;
  up(service: string, url: string | undefined): void;
  close(): void;
}

export function startProgress(out: NodeJS.WritableStream & { isTTY?: boolean }, t0 = Date.now()): StartProgress {
  const colour = out.isTTY === true && !process.env.NO_COLOR;
  const dim = (s: string) => (colour ? `\x1b[2m${s}\x1b[22m` : s);
  const green = (s: string) => (colour ? `\x1b[32m${s}\x1b[39m` : s);
  const at = () => dim(`${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s`);
  const stage = (service: string, step: string) => out.write(`${at()}  ${dim('…')} ${service.padEnd(15)} ${dim(step)}\n`);
  const off = onProgress((e) => stage(e.service, e.step));
  return {
    stage,
    up: (service, url) => out.write(`${at()}  ${green('✓')} ${service.padEnd(15)} ${url ?? 'running'}\n`),
    close: off,
  };
}
