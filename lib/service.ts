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
