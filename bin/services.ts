// Every runnable service, by the name `cog service <name>` takes, in embedded start order
// (chains first, gateway last). Modules load lazily so one service per process loads only its own.
import type { ServiceStarter } from '../lib/service.ts';
import type { Config } from '../lib/config.ts';
import type { SagaOptions } from '../subgraphs/sleeves/index.ts';

/**
 * What the composition hands a service besides the platform. Product code sets nothing here; the
 * fault suites' preload (test/helpers/fault-hooks.mjs, through NODE_OPTIONS) injects the needlecast
 * saga's failAt/afterStep before any service starts.
 */
export interface ServiceOptions {
  needlecast?: SagaOptions;
}
// Held on globalThis: the preload loads this module through tsx, while `cog start` may run the
// precompiled copy of it (bin/bundle.mjs); both must see the same options.
const OPTIONS = Symbol.for('cog.serviceOptions');
const holder = globalThis as { [OPTIONS]?: ServiceOptions };
const serviceOptions: ServiceOptions = (holder[OPTIONS] ??= {});

export function injectServiceOptions(o: ServiceOptions): void {
  Object.assign(serviceOptions, o);
}

export interface ServiceEntry {
  name: string;
  describe: string;
  /** Not started by `cog start` (embedded mode runs it in-process elsewhere). */
  distributedOnly?: boolean;
  /** The port it listens on, checked free before anything starts. */
  port?: (c: Config) => number;
  /**
   * Starts beside the entries after it (its start is mostly waiting: a child process, a chain);
   * the launcher waits for it before it starts this entry (or at the end, when that one does not
   * run in this process).
   */
  joinBefore?: string;
  /** Work that can begin before the stores open (a child process to spawn), called first thing by the launcher. */
  prepare?: (c: Config) => Promise<void>;
  load: () => Promise<ServiceStarter>;
}

export const SERVICES: ServiceEntry[] = [
  {
    name: 'cortex',
    port: (c) => c.ports.cortex,
    // Medulla and the Hippocampus do not need it; the Thalamus folds its root from the start.
    joinBefore: 'thalamus',
    describe: 'Cortex EVM (anvil child, contract deploy, transaction submitter)',
    // anvil loads its state while this process loads its modules and opens its database.
    prepare: async (c) => (await import('../subgraphs/chains/index.ts')).prestartCortex(c),
    load: async () => (await import('../subgraphs/chains/index.ts')).services.cortex(),
  },
  {
    name: 'medulla',
    port: (c) => c.ports.medulla,
    describe: 'Medulla proof-of-work chain :8332',
    load: async () => (await import('../subgraphs/chains/index.ts')).services.medulla(),
  },
  {
    name: 'hippocampus',
    port: (c) => c.ports.hippocampus,
    describe: 'Hippocampus DAG store :5001',
    load: async () => (await import('../subgraphs/memory/index.ts')).services.hippocampus(),
  },
  {
    name: 'thalamus',
    port: (c) => c.ports.thalamus,
    describe: 'Thalamus router (coherence root) :7072',
    load: async () => (await import('../subgraphs/chains/index.ts')).services.thalamus(),
  },
  { name: 'dhf', port: (c) => c.ports.dhf, describe: 'DHF compositor :7073', load: async () => (await import('../subgraphs/memory/index.ts')).services.dhf() },
  {
    name: 'treasury',
    port: (c) => c.ports.treasury,
    describe: 'Treasury :7074',
    load: async () => (await import('../subgraphs/economy/index.ts')).services.treasury(),
  },
  {
    name: 'faucet',
    port: (c) => c.ports.faucet,
    describe: 'Bandwidth faucet :7075',
    load: async () => (await import('../subgraphs/economy/index.ts')).services.faucet(),
  },
  {
    name: 'needlecast',
    port: (c) => c.ports.needlecast,
    describe: 'Needlecast router :7071',
    load: async () => (await import('../subgraphs/sleeves/index.ts')).services.needlecast(serviceOptions.needlecast),
  },
  {
    name: 'sleeve-runtime',
    describe: 'Sleeve runtime (leased sleeves: tick loops, /sleeves/:id/identity on one listener)',
    load: async () => (await import('../subgraphs/sleeves/index.ts')).services.sleeveRuntime(),
  },
  { name: 'worker', describe: 'Worker runner (six passes per epoch)', load: async () => (await import('../subgraphs/residues/index.ts')).services.worker() },
  ...['stacks', 'sleeves', 'memory', 'chains', 'economy', 'residues'].map((sg) => ({
    name: `subgraph-${sg}`,
    describe: `GraphQL subgraph ${sg} (distributed mode only; embedded runs it inside the gateway)`,
    distributedOnly: true,
    load: async () => (await import('../router/subgraph-service.ts')).subgraphService(sg),
  })),
  {
    name: 'gateway',
    port: (c) => c.ports.gateway,
    describe: 'Gateway :7070 (GraphQL router, /v1 REST, events)',
    load: async () => (await import('../router/service.ts')).startGateway,
  },
];

/**
 * Whether a process cares for the database's tables (lib/db/table-care.ts): maintenance, the
 * worker runner's kind of work, so in a cluster only the processes that run the worker (two under
 * `cog up`) do it, not all 22, which each read the statistics every round and vacuumed what they
 * saw, the same tables one after another. (The distributed mixed load did not settle it: 165 req/s
 * in one run before, 163-282 in three after, 198 with care off everywhere.) PGlite is one process's
 * database, so that process cares for it whatever it runs.
 */
export function runsTableCare(database: 'pglite' | 'postgres', services: readonly string[]): boolean {
  return database === 'pglite' || services.includes('worker');
}
