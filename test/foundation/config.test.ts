import { describe, it, expect } from 'vitest';
import { loadConfig, ConfigError } from '../../lib/config.ts';

describe('config', () => {
  it('defaults to the spec constants and ports', () => {
    const c = loadConfig({});
    expect(c.epochIntervalMs).toBe(4000);
    expect(c.driftMax).toBe(15);
    expect(c.fidelityMin).toBe(0.6);
    expect(c.ports).toEqual({
      gateway: 7070,
      needlecast: 7071,
      thalamus: 7072,
      dhf: 7073,
      treasury: 7074,
      faucet: 7075,
      medulla: 8332,
      hippocampus: 5001,
      cortex: 8545,
    });
    expect(c.urls.medulla).toBe('http://127.0.0.1:8332');
    expect(c.faucetCooldownMs).toBe(60_000);
    expect(c.residueExpiryEpochs).toBe(100);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.databasePoolSize).toBe(10);
    expect(c.pgliteSharedBuffersMb).toBe(64);
    expect(c.rateLimitPerMin).toBe(600_000); // 10,000 a second from one address: a flood guard (docs/decisions.md)
  });

  it('takes every override from the environment', () => {
    const c = loadConfig({
      COG_EPOCH_INTERVAL_MS: '250',
      COG_DRIFT_MAX: '7.5',
      COG_FIDELITY_MIN: '0.9',
      GATEWAY_PORT: '9070',
      MEDULLA_PEERS: 'http://127.0.0.1:1,http://127.0.0.1:2',
    });
    expect(c.epochIntervalMs).toBe(250);
    expect(c.driftMax).toBe(7.5);
    expect(c.fidelityMin).toBe(0.9);
    expect(c.ports.gateway).toBe(9070);
    expect(c.urls.base).toBe('http://127.0.0.1:9070');
    expect(c.medullaPeers).toHaveLength(2);
    expect(loadConfig({ DATABASE_POOL_SIZE: '3' }).databasePoolSize).toBe(3);
    expect(loadConfig({ PGLITE_SHARED_BUFFERS_MB: '32' }).pgliteSharedBuffersMb).toBe(32);
    expect(() => loadConfig({ PGLITE_SHARED_BUFFERS_MB: '0' })).toThrow(/PGLITE_SHARED_BUFFERS_MB/);
  });

  it('reads the service settings too: nothing else in the product reads the environment', () => {
    const d = loadConfig({});
    expect(d).toMatchObject({
      subgraphs: 'local',
      subgraphUrls: {},
      subgraphPorts: {},
      runnerId: undefined,
      hippocampusNodeId: undefined,
      masterKeyHex: undefined,
      thalamusOperatorKey: undefined,
    });
    expect(d.medulla).toEqual({ nodeId: undefined, autoMine: true, duty: 0.25, paced: true, genesisDifficulty: undefined });
    expect(d.cortex).toEqual({ blockTimeS: 4, operatorKey: undefined });
    const c = loadConfig({
      COG_SUBGRAPHS: 'remote',
      SUBGRAPH_STACKS_URL: 'http://127.0.0.1:9081/graphql',
      SUBGRAPH_STACKS_PORT: '9081',
      SUBGRAPH_MEMORY_PORT: '0',
      COG_RUNNER_ID: 'worker-1',
      COG_SLEEVE_RUNTIME_WEIGHT: '0',
      HIPPOCAMPUS_NODE_ID: 'hippocampus-2',
      COG_MASTER_KEY: 'ab'.repeat(32),
      MEDULLA_NODE_ID: 'medulla-2',
      MEDULLA_AUTOMINE: 'off',
      MEDULLA_DUTY: '0.5',
      MEDULLA_PACING: 'off',
      MEDULLA_GENESIS_DIFFICULTY: '12',
      COG_CORTEX_BLOCK_TIME: '1',
      CORTEX_OPERATOR_KEY: 'cd'.repeat(32),
      THALAMUS_OPERATOR_KEY: 'EF'.repeat(32),
    });
    expect(c.subgraphs).toBe('remote');
    expect(c.subgraphUrls).toEqual({ stacks: 'http://127.0.0.1:9081/graphql' });
    expect(c.subgraphPorts).toEqual({ stacks: 9081, memory: 0 });
    expect(d.sleeveRuntimeWeight).toBe(1);
    expect(c).toMatchObject({
      runnerId: 'worker-1',
      sleeveRuntimeWeight: 0,
      hippocampusNodeId: 'hippocampus-2',
      masterKeyHex: 'ab'.repeat(32),
      thalamusOperatorKey: 'ef'.repeat(32),
    });
    expect(c.medulla).toEqual({ nodeId: 'medulla-2', autoMine: false, duty: 0.5, paced: false, genesisDifficulty: 12 });
    expect(c.cortex).toEqual({ blockTimeS: 1, operatorKey: `0x${'cd'.repeat(32)}` });
  });

  it.each([
    ['COG_SUBGRAPHS', 'sometimes'],
    ['SUBGRAPH_STACKS_URL', 'not a url'],
    ['SUBGRAPH_MEMORY_PORT', '70000'],
    ['COG_RUNNER_ID', 'has space'],
    ['COG_SLEEVE_RUNTIME_WEIGHT', '-1'],
    ['COG_SLEEVE_RUNTIME_WEIGHT', 'heavy'],
    ['HIPPOCAMPUS_NODE_ID', '../up'],
    ['COG_MASTER_KEY', 'abc'],
    ['MEDULLA_NODE_ID', 'a/b'],
    ['MEDULLA_AUTOMINE', 'yes'],
    ['MEDULLA_DUTY', '2'],
    ['MEDULLA_PACING', '1'],
    ['MEDULLA_GENESIS_DIFFICULTY', 'hard'],
    ['COG_CORTEX_BLOCK_TIME', '-1'],
    ['CORTEX_OPERATOR_KEY', '0x1234'],
    ['THALAMUS_OPERATOR_KEY', 'zz'.repeat(32)],
    ['LOG_LEVEL', 'loud'],
    ['COG_EPOCH_INTERVAL_MS', 'soon'],
    ['COG_EPOCH_INTERVAL_MS', '-5'],
    ['COG_DRIFT_MAX', 'NaN'],
    ['COG_FIDELITY_MIN', '1.5'],
    ['GATEWAY_PORT', '70000'],
    ['DATABASE_URL', 'not a url'],
    ['DATABASE_POOL_SIZE', '0'],
    ['MEDULLA_PEERS', 'http://ok:1,nope'],
    ['COG_AUTH', 'sometimes'],
  ])('a bad %s stops with a message naming it', (name, value) => {
    let err: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe(name);
    expect((err as Error).message).toContain(name);
  });
});
