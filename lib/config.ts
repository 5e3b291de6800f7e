// Configuration: every constant of the spec with its environment override, read and validated
// once at start. A bad value throws a ConfigError naming the variable, and the start stops.
import path from 'node:path';

export class ConfigError extends Error {
  constructor(
    public readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const v = Number(raw);
  if (v < min || v > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${v}`);
  return v;
}

function num(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  const v = Number(raw);
  if (!Number.isFinite(v)) throw new ConfigError(name, `must be a number, got "${raw}"`);
  if (v < min || v > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${v}`);
  return v;
}

function url(env: Env, name: string, def?: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  try {
    new URL(raw);
  } catch {
    throw new ConfigError(name, `must be a URL, got "${raw}"`);
  }
  return raw.replace(/\/+$/, '');
}

function list(env: Env, name: string): string[] {
  const raw = env[name];
  if (!raw) return [];
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    try {
      new URL(item);
    } catch {
      throw new ConfigError(name, `must be a comma-separated list of URLs, got "${item}"`);
    }
  }
  return items.map((s) => s.replace(/\/+$/, ''));
}

function name(env: Env, variable: string, def: string, re = /^[A-Za-z0-9_-]{1,64}$/): string {
  const raw = env[variable];
  if (raw === undefined || raw === '') return def;
  if (!re.test(raw)) throw new ConfigError(variable, `must match ${re}, got "${raw}"`);
  return raw;
}

function oneOf<T extends string>(env: Env, name: string, def: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function optionalInt(env: Env, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return int(env, name, 0, min, max);
}

/** A secret or key in hex: `bytes` long, optionally 0x-prefixed when `prefixed`; returned lowercase as given. */
function hexKey(env: Env, name: string, bytes: number, what: string, prefixed = false): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const re = new RegExp(`^${prefixed ? '(0x)?' : ''}[0-9a-fA-F]{${bytes * 2}}$`);
  if (!re.test(raw)) throw new ConfigError(name, `must be ${bytes * 2} hex characters (${what})`);
  return raw;
}

/** SUBGRAPH_<NAME>_URL and SUBGRAPH_<NAME>_PORT (distributed mode), by lowercase subgraph name. */
function subgraphEndpoints(env: Env): { urls: Record<string, string>; ports: Record<string, number> } {
  const urls: Record<string, string> = {};
  const ports: Record<string, number> = {};
  for (const key of Object.keys(env).sort()) {
    const m = /^SUBGRAPH_([A-Z0-9]+)_(URL|PORT)$/.exec(key);
    if (!m || env[key] === undefined || env[key] === '') continue;
    const sub = m[1]!.toLowerCase();
    if (m[2] === 'URL') urls[sub] = url(env, key)!;
    else ports[sub] = int(env, key, 0, 0, 65535);
  }
  return { urls, ports };
}

export interface Config {
  /** The spec's constants. */
  epochIntervalMs: number;
  driftMax: number;
  fidelityMin: number;
  /** Open residues expire after this many epochs (ARCHITECTURE.md). */
  residueExpiryEpochs: number;
  /** Unpinned memory nodes older than this many epochs are pruned. */
  retentionEpochs: number;
  /** Most nodes one memory-reconciler pass prunes (one batch per pass: a backlog drains over epochs). */
  pruneBatch: number;
  /** Memory write batches (group commits over stacks) a process commits at once. */
  writeBatches: number;
  /**
   * COG_TABLE_CARE (auto: on PGlite, and on PostgreSQL while no autovacuum runs; on; off) and
   * COG_TABLE_CARE_MS: the platform vacuums and analyses its tables where nothing else does (lib/db/table-care.ts).
   */
  tableCare: { mode: 'auto' | 'on' | 'off'; everyMs: number; checkpointWalBytes?: number };
  faucetCooldownMs: number;
  ports: {
    gateway: number;
    needlecast: number;
    thalamus: number;
    dhf: number;
    treasury: number;
    faucet: number;
    medulla: number;
    hippocampus: number;
    cortex: number;
  };
  /** Interface services bind to. */
  host: string;
  dataDir: string;
  /** Real engines; undefined selects the embedded adapter. */
  databaseUrl?: string;
  /** DATABASE_POOL_SIZE: connections this process opens to PostgreSQL at most (default 10; `cog up --distributed` sizes each process so the whole topology fits the server). */
  databasePoolSize: number;
  /** PGLITE_SHARED_BUFFERS_MB: the embedded database's shared buffers (PostgreSQL's shared_buffers), in MB; 64 by default, as its open touches every page of them (docs/decisions.md). */
  pgliteSharedBuffersMb: number;
  /** PGLITE_THREAD (off, on): the embedded database's engine in the platform's thread (the default), or on a worker thread of its own. */
  pgliteThread: boolean;
  natsUrl?: string;
  redisUrl?: string;
  /** COG_NATS_STREAM / COG_NATS_PREFIX: JetStream stream and subject prefix (defaults COG, cog). */
  natsStream: string;
  natsPrefix: string;
  /** COG_REDIS_PREFIX: prefix of every cache key on Redis (default none). */
  redisPrefix?: string;
  s3: { endpoint?: string; bucket: string; region: string; accessKeyId?: string; secretAccessKey?: string };
  cortexRpcUrl?: string;
  medullaPeers: string[];
  hippocampusPeers: string[];
  /** HIPPOCAMPUS_FALLBACK_URLS: Hippocampus nodes tried in order when urls.hippocampus fails (connection error, timeout, 5xx). */
  hippocampusFallbacks: string[];
  /** HIPPOCAMPUS_TIMEOUT_MS: per-attempt timeout of a Hippocampus HTTP call (a dead node costs this much). */
  hippocampusTimeoutMs: number;
  /** Where services find each other (spec's *_URL variables). */
  urls: {
    base: string;
    medulla: string;
    hippocampus: string;
    cortex: string;
    thalamus: string;
    dhf: string;
    needlecast: string;
    treasury: string;
    faucet: string;
  };
  auth: 'off' | 'required';
  /** COG_AUTH_SKEW_MS: how far a signed request's timestamp may be from the server clock. */
  authSkewMs: number;
  /** COG_RATE_LIMIT_PER_MIN: gateway requests a minute per client address; 0 turns it off. */
  rateLimitPerMin: number;
  internalToken?: string;
  logLevel: string;
  /** COG_LOG_FORMAT: auto (pretty on a terminal, JSON otherwise), json or pretty. */
  logFormat: 'auto' | 'json' | 'pretty';
  graphqlIntrospection: boolean;
  /** Identical concurrent subgraph queries share one fetch (router/coalesce.ts). */
  graphqlCoalesce: boolean;
  /** In-process subgraph operations run compiled (graphql-jit, router/local-source.ts); off: graphql-js's execute. */
  graphqlJit: boolean;
  graphqlLimits: { maxDepth: number; maxAliases: number; maxRootFields: number; maxTokens: number; maxCost: number };
  /** OTEL_EXPORTER_OTLP_ENDPOINT: where OTLP/HTTP traces go (`<url>/v1/traces`); unset, tracing is off. OTEL_SERVICE_NAME overrides `cog`/`cog-<service>`. */
  otel?: { endpoint: string; serviceName?: string };
  /** COG_METRICS_CACHE_MS: how long a scrape's database read (outbox depths, sagas, residues) is reused. */
  metricsCacheMs: number;
  /** COG_OPS_PORT: a process whose services have no HTTP endpoint (worker, sleeve runtime, Cortex) serves /metrics, /healthz, /readyz here. */
  opsPort?: number;
  /** COG_READY_TIP_AGE_MS: /readyz reports Medulla down when its tip has not moved for this long (default 5 epoch intervals). */
  readyTipAgeMs: number;
  /** COG_MASTER_KEY: 64 hex, the key that seals stack master secrets (undefined: the key file in the data dir). */
  masterKeyHex?: string;
  /** COG_RUNNER_ID: the worker runner's name in its pass leases (suffixed with the pid). */
  runnerId?: string;
  /** COG_SLEEVE_RUNTIME_ID: the sleeve runtime's name in its sleeve leases (suffixed with the pid). */
  sleeveRuntimeId?: string;
  /** SLEEVE_RUNTIME_PORT: the sleeve runtime's one identity listener (`/sleeves/<id>/identity`); 0 picks a free port. */
  sleeveRuntimePort: number;
  /** COG_SLEEVE_RUNTIME_WEIGHT: this runtime's share of the alive sleeves relative to the others' (default 1; 0: a standby). */
  sleeveRuntimeWeight: number;
  /** HIPPOCAMPUS_NODE_ID: this Hippocampus node's id (its own payload store without S3). */
  hippocampusNodeId?: string;
  /** COG_SUBGRAPHS: the gateway runs the subgraphs in-process (local) or reaches each over HTTP (remote). */
  subgraphs: 'local' | 'remote';
  /** SUBGRAPH_<NAME>_URL: where the gateway reaches a remote subgraph (default: its supergraph routing URL). */
  subgraphUrls: Record<string, string>;
  /** SUBGRAPH_<NAME>_PORT: the port a subgraph service listens on (default: its routing URL's port). */
  subgraphPorts: Record<string, number>;
  medulla: {
    /** MEDULLA_NODE_ID (default medulla-<port>). */
    nodeId?: string;
    /** MEDULLA_AUTOMINE (on|off). */
    autoMine: boolean;
    /** MEDULLA_DUTY: CPU share of background mining, 0.01..1. */
    duty: number;
    /** MEDULLA_PACING (on|off): background blocks come one interval after their parent. */
    paced: boolean;
    /** MEDULLA_GENESIS_DIFFICULTY (default from the epoch interval). */
    genesisDifficulty?: number;
  };
  cortex: {
    /** COG_CORTEX_BLOCK_TIME: seconds between the embedded anvil's blocks (default 4, the spec's Clique period). */
    blockTimeS: number;
    /** CORTEX_OPERATOR_KEY: 32 bytes of hex, 0x-prefixed (anvil's dev key when unset and the node is anvil). */
    operatorKey?: string;
  };
  /** THALAMUS_OPERATOR_KEY: the Thalamus's 64 hex ed25519 seed, lowercase (undefined: a key file in the data dir). */
  thalamusOperatorKey?: string;
}

/** COG_INTERNAL_TOKEN: the bearer token internal services require; short ones are guessable. */
function internalToken(env: Env): string | undefined {
  const raw = env.COG_INTERNAL_TOKEN;
  if (!raw) return undefined;
  if (raw.length < 16 || /\s/.test(raw)) throw new ConfigError('COG_INTERNAL_TOKEN', 'must be at least 16 characters with no whitespace');
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const ports = {
    gateway: int(env, 'GATEWAY_PORT', 7070, 0, 65535),
    needlecast: int(env, 'NEEDLECAST_PORT', 7071, 0, 65535),
    thalamus: int(env, 'THALAMUS_PORT', 7072, 0, 65535),
    dhf: int(env, 'DHF_PORT', 7073, 0, 65535),
    treasury: int(env, 'TREASURY_PORT', 7074, 0, 65535),
    faucet: int(env, 'FAUCET_PORT', 7075, 0, 65535),
    medulla: int(env, 'MEDULLA_PORT', 8332, 0, 65535),
    hippocampus: int(env, 'HIPPOCAMPUS_PORT', 5001, 0, 65535),
    cortex: int(env, 'CORTEX_PORT', 8545, 0, 65535),
  };
  const host = env.COG_HOST || '127.0.0.1';
  const subgraphs = subgraphEndpoints(env);
  const withPrefix = (k: string | undefined) => (k === undefined || k.startsWith('0x') ? k : `0x${k}`);
  const local = (port: number) => `http://127.0.0.1:${port}`;
  const cfg: Config = {
    epochIntervalMs: int(env, 'COG_EPOCH_INTERVAL_MS', 4000, 50, 3_600_000),
    driftMax: num(env, 'COG_DRIFT_MAX', 15, 0, 1e9),
    fidelityMin: num(env, 'COG_FIDELITY_MIN', 0.6, 0, 1),
    residueExpiryEpochs: int(env, 'COG_RESIDUE_EXPIRY_EPOCHS', 100, 1, 1e9),
    retentionEpochs: int(env, 'COG_RETENTION_EPOCHS', 1000, 3, 1e9),
    pruneBatch: int(env, 'COG_PRUNE_BATCH', 500, 1, 1_000_000),
    writeBatches: int(env, 'COG_WRITE_BATCHES', 2, 1, 64),
    tableCare: {
      mode: oneOf(env, 'COG_TABLE_CARE', 'auto', ['auto', 'on', 'off'] as const),
      everyMs: int(env, 'COG_TABLE_CARE_MS', 10_000, 1000, 86_400_000),
      // PGlite: a checkpoint once this much WAL was written since the last (0: only at shutdown;
      // unset: the database's max_wal_size, as its checkpointer would).
      checkpointWalBytes: env.COG_TABLE_CARE_CHECKPOINT_MB ? int(env, 'COG_TABLE_CARE_CHECKPOINT_MB', 0, 0, 1_000_000) * 1024 * 1024 : undefined,
    },
    faucetCooldownMs: int(env, 'COG_FAUCET_COOLDOWN_MS', 60_000, 0, 86_400_000),
    ports,
    host,
    dataDir: path.resolve(env.COG_DATA_DIR || './.cog'),
    databaseUrl: url(env, 'DATABASE_URL'),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 200),
    pgliteSharedBuffersMb: int(env, 'PGLITE_SHARED_BUFFERS_MB', 64, 1, 65_536),
    pgliteThread: oneOf(env, 'PGLITE_THREAD', 'off', ['off', 'on'] as const) === 'on',
    natsUrl: url(env, 'NATS_URL'),
    redisUrl: url(env, 'REDIS_URL'),
    natsStream: name(env, 'COG_NATS_STREAM', 'COG'),
    natsPrefix: name(env, 'COG_NATS_PREFIX', 'cog'),
    redisPrefix: env.COG_REDIS_PREFIX ? name(env, 'COG_REDIS_PREFIX', '', /^[A-Za-z0-9_:.-]{1,64}$/) : undefined,
    s3: {
      endpoint: url(env, 'S3_ENDPOINT'),
      bucket: env.S3_BUCKET || 'cog-shards',
      region: env.S3_REGION || 'us-east-1',
      accessKeyId: env.S3_ACCESS_KEY_ID || env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.S3_SECRET_ACCESS_KEY || env.AWS_SECRET_ACCESS_KEY,
    },
    cortexRpcUrl: url(env, 'CORTEX_RPC_URL'),
    medullaPeers: list(env, 'MEDULLA_PEERS'),
    hippocampusPeers: list(env, 'HIPPOCAMPUS_PEERS'),
    hippocampusFallbacks: list(env, 'HIPPOCAMPUS_FALLBACK_URLS'),
    hippocampusTimeoutMs: int(env, 'HIPPOCAMPUS_TIMEOUT_MS', 2500, 100, 120_000),
    urls: {
      // COG_BASE_URL, not BASE_URL: that name is too common (vite and others set it).
      base: url(env, 'COG_BASE_URL', local(ports.gateway))!,
      medulla: url(env, 'MEDULLA_URL', local(ports.medulla))!,
      hippocampus: url(env, 'HIPPOCAMPUS_URL', local(ports.hippocampus))!,
      cortex: url(env, 'CORTEX_URL', url(env, 'CORTEX_RPC_URL') ?? local(ports.cortex))!,
      thalamus: url(env, 'THALAMUS_URL', local(ports.thalamus))!,
      dhf: url(env, 'DHF_URL', local(ports.dhf))!,
      needlecast: url(env, 'NEEDLECAST_URL', local(ports.needlecast))!,
      treasury: url(env, 'TREASURY_URL', local(ports.treasury))!,
      faucet: url(env, 'FAUCET_URL', local(ports.faucet))!,
    },
    auth: oneOf(env, 'COG_AUTH', 'off', ['off', 'required'] as const),
    authSkewMs: int(env, 'COG_AUTH_SKEW_MS', 30_000, 1000, 3_600_000),
    // A flood guard, not a quota: 10,000 a second from one address. At 120,000 a minute one host's
    // sustained perceives (3,300-3,800 a second on 2 cores, session 37) were refused within a
    // minute, and a host running many agents is one address (docs/decisions.md).
    rateLimitPerMin: int(env, 'COG_RATE_LIMIT_PER_MIN', 600_000, 0, 1e9),
    internalToken: internalToken(env),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
    logFormat: oneOf(env, 'COG_LOG_FORMAT', 'auto', ['auto', 'json', 'pretty'] as const),
    graphqlIntrospection: oneOf(env, 'COG_GRAPHQL_INTROSPECTION', 'on', ['on', 'off'] as const) === 'on',
    graphqlCoalesce: oneOf(env, 'COG_GRAPHQL_COALESCE', 'on', ['on', 'off'] as const) === 'on',
    graphqlJit: oneOf(env, 'COG_GRAPHQL_JIT', 'on', ['on', 'off'] as const) === 'on',
    graphqlLimits: {
      maxDepth: int(env, 'COG_GRAPHQL_MAX_DEPTH', 12, 1, 1000),
      maxAliases: int(env, 'COG_GRAPHQL_MAX_ALIASES', 30, 0, 10_000),
      maxRootFields: int(env, 'COG_GRAPHQL_MAX_ROOT_FIELDS', 20, 1, 10_000),
      maxTokens: int(env, 'COG_GRAPHQL_MAX_TOKENS', 5000, 10, 1_000_000),
      maxCost: int(env, 'COG_GRAPHQL_MAX_COST', 20_000, 1, 1e9),
    },
    otel: env.OTEL_EXPORTER_OTLP_ENDPOINT
      ? {
          endpoint: url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')!,
          serviceName: env.OTEL_SERVICE_NAME ? name(env, 'OTEL_SERVICE_NAME', '', /^[A-Za-z0-9_.:-]{1,64}$/) : undefined,
        }
      : undefined,
    metricsCacheMs: int(env, 'COG_METRICS_CACHE_MS', 1000, 0, 60_000),
    opsPort: env.COG_OPS_PORT ? int(env, 'COG_OPS_PORT', 0, 0, 65535) : undefined,
    readyTipAgeMs: 0,
    masterKeyHex: hexKey(env, 'COG_MASTER_KEY', 32, '32 bytes'),
    runnerId: env.COG_RUNNER_ID ? name(env, 'COG_RUNNER_ID', '', /^[A-Za-z0-9_.:-]{1,64}$/) : undefined,
    sleeveRuntimeId: env.COG_SLEEVE_RUNTIME_ID ? name(env, 'COG_SLEEVE_RUNTIME_ID', '', /^[A-Za-z0-9_.:-]{1,64}$/) : undefined,
    sleeveRuntimePort: int(env, 'SLEEVE_RUNTIME_PORT', 0, 0, 65535),
    sleeveRuntimeWeight: int(env, 'COG_SLEEVE_RUNTIME_WEIGHT', 1, 0, 1000),
    hippocampusNodeId: env.HIPPOCAMPUS_NODE_ID ? name(env, 'HIPPOCAMPUS_NODE_ID', '', /^[A-Za-z0-9_.-]{1,64}$/) : undefined,
    subgraphs: oneOf(env, 'COG_SUBGRAPHS', 'local', ['local', 'remote'] as const),
    subgraphUrls: subgraphs.urls,
    subgraphPorts: subgraphs.ports,
    medulla: medullaConfig(env),
    cortex: {
      blockTimeS: int(env, 'COG_CORTEX_BLOCK_TIME', 4, 0, 3600),
      operatorKey: withPrefix(hexKey(env, 'CORTEX_OPERATOR_KEY', 32, 'a 32-byte key', true)),
    },
    thalamusOperatorKey: hexKey(env, 'THALAMUS_OPERATOR_KEY', 32, 'an ed25519 seed')?.toLowerCase(),
  };
  cfg.readyTipAgeMs = int(env, 'COG_READY_TIP_AGE_MS', 5 * cfg.epochIntervalMs, 100, 86_400_000);
  return cfg;
}

function medullaConfig(env: Env): Config['medulla'] {
  return {
    nodeId: env.MEDULLA_NODE_ID ? name(env, 'MEDULLA_NODE_ID', '', /^[A-Za-z0-9_.:-]{1,64}$/) : undefined,
    autoMine: oneOf(env, 'MEDULLA_AUTOMINE', 'on', ['on', 'off'] as const) === 'on',
    duty: num(env, 'MEDULLA_DUTY', 0.25, 0.01, 1),
    paced: oneOf(env, 'MEDULLA_PACING', 'on', ['on', 'off'] as const) === 'on',
    genesisDifficulty: optionalInt(env, 'MEDULLA_GENESIS_DIFFICULTY', 0, Number.MAX_SAFE_INTEGER),
  };
}
