import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';

/** DFE_HUNT_MAX_CATCHUP_SECONDS (docs/hunts.md#catch-up): whole seconds or a duration, default one day. */
describe('DFE_HUNT_MAX_CATCHUP_SECONDS', () => {
  it('defaults to one day', () => {
    expect(loadConfig({}).runner.maxCatchupSeconds).toBe(86_400);
  });

  it.each([
    ['3600', 3600],
    ['12h', 43_200],
    ['1d12h', 129_600],
    [' 2d ', 172_800],
  ])('reads %j as %i seconds', (raw, seconds) => {
    expect(loadConfig({ DFE_HUNT_MAX_CATCHUP_SECONDS: raw }).runner.maxCatchupSeconds).toBe(seconds);
  });

  it.each(['0', '-1', '1.5', 'a day', '1h1d'])('rejects %j naming the variable and the value', (raw) => {
    expect(() => loadConfig({ DFE_HUNT_MAX_CATCHUP_SECONDS: raw })).toThrow(
      `invalid DFE_HUNT_MAX_CATCHUP_SECONDS=${JSON.stringify(raw)}: must be whole seconds ≥ 1 or a duration`,
    );
  });
});
