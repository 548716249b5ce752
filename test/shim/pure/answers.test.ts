import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isDfeError } from '../../../src/errors.js';
import { onFailure, reusable, type FailSafePolicy } from '../../../src/shim/decision.js';
import { cacheKey } from '../../../src/shim/key.js';
import { parseHold, validateParams } from '../../../src/shim/params.js';
import { parseResult } from '../../../src/shim/result.js';
import { ageSeconds, clamp, finalValue, MAX_SERVABLE, servedValue } from '../../../src/shim/value.js';
import { compiled } from '../../helpers/shim.js';

const q = compiled('q', 'SELECT 1', { params: ['service', 'ns'] });

function paramError(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    expect(isDfeError(err, 'PARAM_INVALID')).toBe(true);
    return (err as { key?: string }).key;
  }
}

describe('cache key', () => {
  it('is the name plus sorted declared params; undeclared and reserved params do not count', () => {
    const a = cacheKey('q', ['service', 'ns'], { service: 'x', ns: 'y' });
    const b = cacheKey('q', ['ns', 'service'], { ns: 'y', service: 'x' });
    expect(a).toBe(b);
    expect(cacheKey('q', ['service', 'ns'], validateParams(q, { service: 'x', ns: 'y', hold: '5', api_key: 'k', other: 'z' }))).toBe(a);
    expect(cacheKey('q', ['service', 'ns'], { service: 'x', ns: 'z' })).not.toBe(a);
    expect(cacheKey('r', ['service', 'ns'], { service: 'x', ns: 'y' })).not.toBe(a);
  });
  it('is the JSON of [name, sorted [param, value] pairs], whatever the characters', () => {
    fc.assert(
      fc.property(fc.string(), fc.dictionary(fc.string(), fc.string()), (name, params) => {
        const declared = Object.keys(params);
        const pairs = [...declared].sort().map((p) => [p, params[p]]);
        return cacheKey(name, declared, params) === JSON.stringify([name, pairs]);
      }),
    );
  });
});

describe('param validation', () => {
  it('accepts 1-253 chars of [A-Za-z0-9_.:-]', () => {
    expect(validateParams(q, { service: 'svc-1_a.b:c', ns: 'x'.repeat(253) })).toEqual({ service: 'svc-1_a.b:c', ns: 'x'.repeat(253) });
  });
  it('rejects missing, empty, too long, bad characters and repeated values, naming the param', () => {
    expect(paramError(() => validateParams(q, { service: 'a' }))).toBe('ns');
    expect(paramError(() => validateParams(q, { service: '', ns: 'a' }))).toBe('service');
    expect(paramError(() => validateParams(q, { service: 'a', ns: 'x'.repeat(254) }))).toBe('ns');
    expect(paramError(() => validateParams(q, { service: "a' OR 1=1", ns: 'a' }))).toBe('service');
    expect(paramError(() => validateParams(q, { service: 'a b', ns: 'a' }))).toBe('service');
    expect(paramError(() => validateParams(q, { service: ['a', 'b'], ns: 'a' }))).toBe('service');
  });
  it('parses hold as a number >= 0 and rejects anything else', () => {
    expect(parseHold(q, {})).toBeUndefined();
    expect(parseHold(q, { hold: '70' })).toBe(70);
    expect(parseHold(q, { hold: '0.5' })).toBe(0.5);
    for (const bad of ['', 'abc', '-1', 'NaN', 'Infinity', '1e999', '0x10', ' 5']) {
      expect(paramError(() => parseHold(q, { hold: bad }))).toBe('hold');
    }
  });
});

describe('result parsing', () => {
  const meta = [{ name: 'a' }, { name: 'value' }];
  it('reads row 0 by index or by name, numbers and numeric strings', () => {
    expect(parseResult({ meta, data: [[1, 2.5]] }, 1)).toEqual({ kind: 'number', value: 2.5 });
    expect(parseResult({ meta, data: [[1, '9007199254740993']] }, 'value')).toEqual({ kind: 'number', value: Number('9007199254740993') });
    expect(parseResult({ meta, data: [['-3', 0], [9, 9]] }, 0)).toEqual({ kind: 'number', value: -3 });
  });
  it('treats no row and NULL as a successful 0', () => {
    expect(parseResult({ meta, data: [] }, 0)).toEqual({ kind: 'number', value: 0 });
    expect(parseResult({ meta, data: [[null, 1]] }, 'a')).toEqual({ kind: 'number', value: 0 });
  });
  it('rejects non-numeric, non-finite and missing columns', () => {
    for (const cell of ['abc', 'nan', 'inf', '-inf', '', true, [1], { a: 1 }]) {
      expect(parseResult({ meta, data: [[cell, 1]] }, 0).kind).toBe('invalid');
    }
    expect(parseResult({ meta, data: [[1, 1]] }, 2).kind).toBe('invalid');
    expect(parseResult({ meta, data: [[1, 1]] }, 'nope').kind).toBe('invalid');
  });
  it('rejects values KEDA cannot carry (|v| × 1000 ≥ 2^63), as numbers or quoted 64-bit integers', () => {
    for (const cell of ['18446744073709551615', '9223372036854775', 1e16, 1e306, -1e300, '-9223372036854775807']) {
      expect(parseResult({ meta, data: [[cell, 1]] }, 0)).toMatchObject({ kind: 'invalid', message: expect.stringContaining('servable range') });
    }
    expect(parseResult({ meta, data: [['9223372036854774', 1]] }, 0)).toEqual({ kind: 'number', value: MAX_SERVABLE });
  });
  it('rejects bodies that are not JSONCompact results; an exception field is an exception', () => {
    const bad: unknown[] = [null, 0, 'x', [], { meta, data: {} }, { meta: 'x', data: [] }, { meta, data: [[1]] }, { meta, data: [{ a: 1, value: 2 }] }, { meta, data: [[1, 2, 3]] }, { data: [[1]] }];
    for (const body of bad) expect(parseResult(body, 0).kind, JSON.stringify(body)).toBe('invalid');
    expect(parseResult({ meta, data: [], exception: 'Code: 159. DB::Exception: Timeout' }, 0)).toMatchObject({ kind: 'exception' });
    expect(parseResult({ meta, data: [[1, 2]], exception: 'Code: 395' }, 0)).toMatchObject({ kind: 'exception' });
  });
});

describe('the value path never serves null, NaN or a value KEDA cannot carry (property)', () => {
  const servable = (v: number) => Number.isFinite(v) && v >= 0 && v <= MAX_SERVABLE && JSON.stringify({ value: v }) !== '{"value":null}';
  const cell = fc.oneof(
    fc.double(),
    fc.double().map(String),
    fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
    fc.constantFrom(null, 'nan', 'inf', '-inf', '', '1e400', true),
    fc.string(),
  );
  const bound = fc.option(fc.double({ min: -MAX_SERVABLE, max: MAX_SERVABLE, noNaN: true }), { nil: undefined });
  it('servedValue is total: any number in, a servable number out', () => {
    fc.assert(fc.property(fc.double(), (v) => servable(servedValue(v))));
  });
  it('result → clamp → served: either a failure or a servable number', () => {
    fc.assert(
      fc.property(cell, bound, bound, (c, a, b) => {
        const parsed = parseResult({ meta: [{ name: 'v' }], data: [[c]] }, 0);
        if (parsed.kind !== 'number') return true;
        const [clampMin, clampMax] = a !== undefined && b !== undefined && a > b ? [b, a] : [a, b];
        return servable(finalValue(parsed.value, { clampMin, clampMax }));
      }),
    );
  });
  it('hold: a 400 or a servable target', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.double().map(String), fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String)), (hold) => {
        try {
          return servable(parseHold(q, { hold }) ?? 0);
        } catch (err) {
          return isDfeError(err, 'PARAM_INVALID');
        }
      }),
    );
  });
});

describe('clamp and served value', () => {
  it('clamps to the band, rounds to 3 decimals, floors at 0', () => {
    expect(clamp(150, { clampMin: 0, clampMax: 100 })).toBe(100);
    expect(clamp(-5, { clampMin: 0, clampMax: 100 })).toBe(0);
    expect(clamp(-5, { clampMin: undefined, clampMax: undefined })).toBe(-5);
    expect(servedValue(1.23456)).toBe(1.235);
    expect(servedValue(-2)).toBe(0);
    expect(servedValue(0.0001)).toBe(0);
    expect(Object.is(servedValue(-0.0001), 0)).toBe(true);
    expect(finalValue(250.4444, { clampMin: 0, clampMax: 100 })).toBe(100);
    expect(finalValue(3.14159, { clampMin: 5, clampMax: undefined })).toBe(5);
    expect(ageSeconds(1000, 3500)).toBe(2.5);
    expect(ageSeconds(3500, 1000)).toBe(0);
  });
});

describe('fail-safe decision', () => {
  const avg: FailSafePolicy = { coldHold: 7, metricType: 'AverageValue', freshForSeconds: 0, maxStaleSeconds: null };
  const val: FailSafePolicy = { ...avg, metricType: 'Value' };
  const good = { value: 42, atMs: 10_000 };

  it('reuses a good value only within fresh_for_seconds', () => {
    expect(reusable(good, avg, 10_500)).toBeUndefined();
    const policy = { ...avg, freshForSeconds: 5 };
    expect(reusable(good, policy, 14_999)).toEqual({ source: 'fresh', value: 42, ageSeconds: 4.999 });
    expect(reusable(good, policy, 15_000)).toBeUndefined();
    expect(reusable(undefined, policy, 11_000)).toBeUndefined();
  });
  it('answers last_good, else cold_hold', () => {
    expect(onFailure(good, avg, 13_000, undefined)).toEqual({ source: 'last_good', value: 42, ageSeconds: 3 });
    expect(onFailure(undefined, avg, 13_000, undefined)).toEqual({ source: 'cold_hold', value: 7, ageSeconds: 0 });
  });
  it('holds the target for Value queries with hold; ignores hold on AverageValue', () => {
    expect(onFailure(good, val, 13_000, 70)).toEqual({ source: 'hold', value: 70, ageSeconds: 0 });
    expect(onFailure(undefined, val, 13_000, 70)).toEqual({ source: 'hold', value: 70, ageSeconds: 0 });
    expect(onFailure(good, val, 13_000, undefined).source).toBe('last_good');
    expect(onFailure(undefined, val, 13_000, undefined).source).toBe('cold_hold');
    expect(onFailure(good, avg, 13_000, 70).source).toBe('last_good');
  });
  it('answers stale (503) once last-good is older than max_stale_seconds, never on cold start', () => {
    const policy = { ...val, maxStaleSeconds: 60 };
    expect(onFailure(good, policy, 70_000, 70).source).toBe('hold');
    expect(onFailure(good, policy, 70_001, 70)).toEqual({ source: 'stale', ageSeconds: 60.001, maxStaleSeconds: 60 });
    expect(onFailure(good, { ...avg, maxStaleSeconds: 60 }, 70_001, undefined).source).toBe('stale');
    expect(onFailure(undefined, policy, 1e12, undefined).source).toBe('cold_hold');
  });
});
