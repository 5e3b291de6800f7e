// What every runnable service looks like to the launcher (bin/cog.ts): embedded mode starts them
// all in one process, `cog service <name>` starts one.
import type { Platform } from './platform.ts';

export interface RunningService {
  name: string;
  /** Listening URL, when the service has an HTTP endpoint. */
  url?: string;
  close(): Promise<void>;
}

export type ServiceStarter = (p: Platform) => Promise<RunningService>;

// The process's start: while the launcher starts its services (every one of them in `cog start`),
// the background loops that need not run yet (the Cortex outbox's rounds, the Worker Runner's
// first passes) wait for it, so their queries do not take the one thread the services still
// starting need (issue 13). A platform the launcher does not hold (tests, tools) has started.
const holds = new WeakMap<Platform, Promise<void>>();

/** Holds `p`'s start until the returned function is called (the launcher, once every service is up). */
export function holdStart(p: Platform): () => void {
  let release!: () => void;
  holds.set(p, new Promise<void>((r) => (release = r)));
  return () => release();
}

/** Resolves once `p`'s start is over (at once when nothing holds it). */
export function started(p: Platform): Promise<void> {
  return holds.get(p) ?? Promise.resolve();
}
