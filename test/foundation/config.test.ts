import { describe, it, expect } from 'vitest';
import { loadConfig, ConfigError } from '../../lib/config.ts';

describe('config', () => {
  it('defaults to the spec constants and ports', () => {
    const c = loadConfig({});
    expect(c.epochIntervalMs).toBe(4000);
    expect(c.driftMax).toBe(15);
    expect(c.fidelityMin).toBe(0.6);
    expect(c.ports).toEqual({ gateway: 7070, needlecast: 7071, thalamus: 7072, dhf: 7073, treasury: 7074, faucet: 7075, medulla: 8332, hippocampus: 5001, cortex: 8545 });
    expect(c.urls.medulla).toBe('http://127.0.0.1:8332');
    expect(c.faucetCooldownMs).toBe(60_000);
    expect(c.residueExpiryEpochs).toBe(100);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.databasePoolSize).toBe(10);
  });

  it('takes every override from the environment', () => {
    const c = loadConfig({ COG_EPOCH_INTERVAL_MS: '250', COG_DRIFT_MAX: '7.5', COG_FIDELITY_MIN: '0.9', GATEWAY_PORT: '9070', MEDULLA_PEERS: 'http://127.0.0.1:1,http://127.0.0.1:2' });
    expect(c.epochIntervalMs).toBe(250);
    expect(c.driftMax).toBe(7.5);
    expect(c.fidelityMin).toBe(0.9);
    expect(c.ports.gateway).toBe(9070);
    expect(c.urls.base).toBe('http://127.0.0.1:9070');
    expect(c.medullaPeers).toHaveLength(2);
    expect(loadConfig({ DATABASE_POOL_SIZE: '3' }).databasePoolSize).toBe(3);
  });

  it.each([
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
