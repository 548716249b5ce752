import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { isDfeError } from '../../src/errors.js';

/**
 * issue 9 item 14: the original shim's CLICKHOUSE_* names are fallbacks (the
 * DFE_* name wins), and host form defaults to TLS like the original did (its
 * port default stays 8123, so its users set the port).
 */
describe('legacy CLICKHOUSE_* names', () => {
  it('each one is read when its DFE_* twin is unset', () => {
    const c = loadConfig({
      CLICKHOUSE_HOST: 'ch.example',
      CLICKHOUSE_PORT: '8443',
      CLICKHOUSE_USER: 'scaler',
      CLICKHOUSE_PASSWORD: 'pw',
      CLICKHOUSE_DATABASE: 'events',
      CLICKHOUSE_SECURE: 'true',
      CLICKHOUSE_VERIFY: 'false',
      CLICKHOUSE_CA_CERT: '/etc/ca.pem',
    }).clickhouse;
    expect(c).toMatchObject({
      backend: 'server',
      url: 'https://ch.example:8443',
      username: 'scaler',
      password: 'pw',
      dataDatabase: 'events',
      verifyTls: false,
      caCertPath: '/etc/ca.pem',
    });
  });

  it('the DFE_* name wins when both are set', () => {
    const c = loadConfig({ CLICKHOUSE_HOST: 'old', DFE_CLICKHOUSE_HOST: 'new', CLICKHOUSE_USER: 'u1', DFE_CLICKHOUSE_USERNAME: 'u2', CLICKHOUSE_SECURE: 'false', DFE_CLICKHOUSE_SECURE: 'true' }).clickhouse;
    expect({ url: c.url, username: c.username }).toEqual({ url: 'https://new:8123', username: 'u2' });
  });

  it('host form defaults to TLS (https), port 8123; secure false is explicit', () => {
    expect(loadConfig({ DFE_CLICKHOUSE_HOST: 'ch' }).clickhouse.url).toBe('https://ch:8123');
    expect(loadConfig({ CLICKHOUSE_HOST: 'ch' }).clickhouse.url).toBe('https://ch:8123');
    expect(loadConfig({ CLICKHOUSE_HOST: 'ch', CLICKHOUSE_SECURE: 'false' }).clickhouse.url).toBe('http://ch:8123');
  });

  it('an invalid legacy value names the variable it came from; a password is never echoed', () => {
    let err: unknown;
    try {
      loadConfig({ CLICKHOUSE_HOST: 'ch', CLICKHOUSE_PORT: 'tcp://10.0.0.1:8123' });
    } catch (e) {
      err = e;
    }
    expect(isDfeError(err, 'CONFIG_INVALID')).toBe(true);
    expect((err as Error).message).toMatch(/^invalid CLICKHOUSE_PORT \(fallback for DFE_CLICKHOUSE_PORT\)="tcp:\/\/10\.0\.0\.1:8123"/);
    for (const env of [{ CLICKHOUSE_PASSWORD: 'hunter2', CLICKHOUSE_PORT: 'x' }, { CLICKHOUSE_HOST: 'ch', CLICKHOUSE_SECURE: 'maybe' }, { DFE_CLICKHOUSE_URL: 'not a url', CLICKHOUSE_DATABASE: 'bad name' }]) {
      try {
        loadConfig({ ...env, CLICKHOUSE_PASSWORD: 'hunter2' });
      } catch (e) {
        expect((e as Error).message).not.toContain('hunter2');
        continue;
      }
      throw new Error('expected CONFIG_INVALID');
    }
  });
});

describe('renamed settings and their old names', () => {
  it('DFE_HUNT_SMOOTHING is observe by default; the old boolean reads true as on and false as off, with a notice', () => {
    expect(loadConfig({}).runner.smoothing.mode).toBe('observe');
    expect(loadConfig({}).notices).toEqual([]);
    const on = loadConfig({ DFE_HUNT_SMOOTHING_ENABLED: 'true' });
    expect(on.runner.smoothing.mode).toBe('on');
    expect(on.notices).toEqual(['read DFE_HUNT_SMOOTHING_ENABLED as a fallback for DFE_HUNT_SMOOTHING; rename it']);
    expect(loadConfig({ DFE_HUNT_SMOOTHING_ENABLED: 'false' }).runner.smoothing.mode).toBe('off');
    expect(loadConfig({ DFE_HUNT_SMOOTHING_ENABLED: 'false', DFE_HUNT_SMOOTHING: 'observe' }).runner.smoothing.mode).toBe('observe');
    expect(() => loadConfig({ DFE_HUNT_SMOOTHING_ENABLED: 'maybe' })).toThrow(/^invalid DFE_HUNT_SMOOTHING_ENABLED \(fallback for DFE_HUNT_SMOOTHING\)="maybe"/);
    expect(() => loadConfig({ DFE_HUNT_SMOOTHING: 'yes' })).toThrow(/^invalid DFE_HUNT_SMOOTHING="yes": must be off, observe or on/);
  });

  it('DFE_HUNTS_PHASE_SPREAD_FRACTION, with DFE_ENGINE_HUNTS_PHASE_SPREAD_FRACTION as its fallback', () => {
    expect(loadConfig({ DFE_HUNTS_PHASE_SPREAD_FRACTION: '0.5' }).runner.spreadFraction).toBe(0.5);
    const old = loadConfig({ DFE_ENGINE_HUNTS_PHASE_SPREAD_FRACTION: '0.6' });
    expect(old.runner.spreadFraction).toBe(0.6);
    expect(old.notices).toEqual(['read DFE_ENGINE_HUNTS_PHASE_SPREAD_FRACTION as a fallback for DFE_HUNTS_PHASE_SPREAD_FRACTION; rename it']);
    expect(loadConfig({ DFE_ENGINE_HUNTS_PHASE_SPREAD_FRACTION: '0.6', DFE_HUNTS_PHASE_SPREAD_FRACTION: '0.7' }).runner.spreadFraction).toBe(0.7);
  });

  it('the runner metrics host has an env twin and a flag; the flag wins', () => {
    expect(loadConfig({}).runner.metricsHost).toBe('0.0.0.0');
    expect(loadConfig({ DFE_HUNT_RUNNER_METRICS_HOST: '127.0.0.1' }).runner.metricsHost).toBe('127.0.0.1');
    expect(loadConfig({ DFE_HUNT_RUNNER_METRICS_HOST: '127.0.0.1' }, { 'metrics-host': '::1' }).runner.metricsHost).toBe('::1');
  });

  it('an auth mode without its secret files is refused by the loader, naming the key', () => {
    expect(() => loadConfig({ DFE_KEDA_SHIM_AUTH_MODE: 'basic', DFE_KEDA_SHIM_AUTH_USERNAME_FILE: '/u' })).toThrow('DFE_KEDA_SHIM_AUTH_MODE=basic needs DFE_KEDA_SHIM_AUTH_PASSWORD_FILE');
    expect(() => loadConfig({ DFE_KEDA_SHIM_AUTH_MODE: 'apiKey' })).toThrow('DFE_KEDA_SHIM_AUTH_MODE=apiKey needs DFE_KEDA_SHIM_AUTH_TOKEN_FILE');
    expect(loadConfig({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: '/t' }).shim.auth.tokenFile).toBe('/t');
  });
});
