import { describe, expect, it } from 'vitest';
import { isDfeError } from '../../../src/errors.js';
import { isActive, readMetadata, requireTarget } from '../../../src/shim/grpc/metadata.js';
import { MAX_SERVABLE } from '../../../src/shim/value.js';

/** The trigger metadata read as the HTTP URL is: pure, no server. */
function error(run: () => unknown): { code: string; key: string | undefined; message: string } {
  try {
    run();
  } catch (err) {
    if (isDfeError(err)) return { code: err.code, key: err.key, message: err.message };
    throw err;
  }
  throw new Error('expected an error');
}

describe('readMetadata', () => {
  it('takes query, keeps every key for the serving path, reads the two numbers', () => {
    const raw = { query: 'pressure', service: 'api', hold: '70', targetValue: '70.5', activationTargetValue: '2', scalerAddress: 'x:9090' };
    expect(readMetadata(raw)).toEqual({ query: 'pressure', raw, targetValue: 70.5, activationTargetValue: 2 });
    expect(readMetadata({ query: 'backlog' })).toMatchObject({ targetValue: undefined, activationTargetValue: 0 });
  });

  it('names the key and the value of a mistake', () => {
    expect(error(() => readMetadata(undefined))).toEqual({ code: 'PARAM_INVALID', key: 'query', message: 'missing required metadata key query (the catalogue query name)' });
    expect(error(() => readMetadata({ query: '' }))).toMatchObject({ key: 'query' });
    for (const bad of ['0', '-1', 'abc', '1e400', '', ' 1', String(MAX_SERVABLE * 10)]) {
      expect(error(() => readMetadata({ query: 'q', targetValue: bad }))).toMatchObject({ code: 'PARAM_INVALID', key: 'targetValue' });
    }
    expect(readMetadata({ query: 'q', activationTargetValue: '0' }).activationTargetValue).toBe(0);
    expect(error(() => readMetadata({ query: 'q', activationTargetValue: '-0.5' }))).toMatchObject({ key: 'activationTargetValue' });
  });

  it('requires targetValue only where a spec is built', () => {
    expect(requireTarget(readMetadata({ query: 'q', targetValue: '3' }))).toBe(3);
    expect(error(() => requireTarget(readMetadata({ query: 'q' })))).toMatchObject({ key: 'targetValue', message: 'missing required metadata key targetValue (the trigger target)' });
  });
});

describe('isActive', () => {
  it('is value > threshold, as KEDA decides activation', () => {
    expect([isActive(0, 0), isActive(0.001, 0), isActive(5, 5), isActive(5.5, 5)]).toEqual([false, true, false, true]);
  });
});
