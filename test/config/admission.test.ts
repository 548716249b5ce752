import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { ADMISSION_DEFAULTS } from '../../src/config/schema.js';

/** The admission settings (docs/failsafe.md#admission): defaults per backend, env overrides, errors naming the variable. */
describe('admission settings', () => {
  it('default per backend', () => {
    expect(loadConfig({}).shim.admission).toEqual(ADMISSION_DEFAULTS.embedded);
    expect(loadConfig({ DFE_CLICKHOUSE_URL: 'http://127.0.0.1:8123' }).shim.admission).toEqual(ADMISSION_DEFAULTS.server);
    expect(ADMISSION_DEFAULTS.server).toEqual({ maxInflight: 200, maxInflightPerQuery: 32, maxQueued: 10_000 });
    expect(ADMISSION_DEFAULTS.embedded).toEqual({ maxInflight: 8, maxInflightPerQuery: 4, maxQueued: 10_000 });
  });

  it('env overrides each; a global cap under the per-query default lowers that one too', () => {
    const env = { DFE_CLICKHOUSE_URL: 'http://127.0.0.1:8123' };
    expect(loadConfig({ ...env, DFE_KEDA_SHIM_MAX_INFLIGHT: '50', DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY: '10', DFE_KEDA_SHIM_MAX_QUEUED: '500' }).shim.admission).toEqual({
      maxInflight: 50,
      maxInflightPerQuery: 10,
      maxQueued: 500,
    });
    expect(loadConfig({ ...env, DFE_KEDA_SHIM_MAX_INFLIGHT: '16' }).shim.admission.maxInflightPerQuery).toBe(16);
  });

  it('bad values are errors naming the variable and value', () => {
    expect(() => loadConfig({ DFE_KEDA_SHIM_MAX_INFLIGHT: '251' })).toThrow('invalid DFE_KEDA_SHIM_MAX_INFLIGHT="251": must be at most 250');
    expect(() => loadConfig({ DFE_KEDA_SHIM_MAX_INFLIGHT: '0' })).toThrow('invalid DFE_KEDA_SHIM_MAX_INFLIGHT="0": must be a whole number greater than 0');
    expect(() => loadConfig({ DFE_KEDA_SHIM_MAX_QUEUED: '1.5' })).toThrow(/DFE_KEDA_SHIM_MAX_QUEUED="1.5"/);
    expect(() => loadConfig({ DFE_KEDA_SHIM_MAX_INFLIGHT: '4', DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY: '5' })).toThrow(
      'invalid DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY=5: must be at most DFE_KEDA_SHIM_MAX_INFLIGHT (4)',
    );
  });
});
