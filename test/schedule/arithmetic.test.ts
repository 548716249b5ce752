import { describe, expect, it } from 'vitest';
import { latestFire, nextFire, phaseOffset, spreadWindow, dueDecision } from '../../src/schedule/arithmetic.js';
import { isDfeError } from '../../src/errors.js';

describe('phase offset (docs/schedule.md#vectors)', () => {
  const intervals = [60, 300, 900, 3600, 86400];
  it.each([
    ['a', [43, 139, 619, 1339, 41659]],
    ['brute-force-ssh', [24, 216, 696, 2136, 13656]],
  ] as const)('%s at fraction 0.8', (id, expected) => {
    expect(intervals.map((i) => phaseOffset(id, i))).toEqual(expected);
  });

  it('post-1682300-71da5fa4 at 60 → 46', () => {
    expect(phaseOffset('post-1682300-71da5fa4', 60)).toBe(46);
  });

  it('tiny intervals clamp the window to at least 1', () => {
    expect([1, 2, 3, 5].map((i) => phaseOffset('a', i))).toEqual([0, 0, 1, 3]);
  });

  it('fraction 0.5', () => {
    expect(intervals.map((i) => phaseOffset('a', i, 0.5))).toEqual([19, 49, 349, 1699, 7099]);
  });

  it('window is an IEEE double multiply, truncated', () => {
    expect(spreadWindow(60)).toBe(48);
    expect(spreadWindow(1)).toBe(1);
    expect(spreadWindow(7, 0.1)).toBe(1);
  });

  it('rejects lone surrogates and empty ids with a hunt error', () => {
    for (const bad of ['\uD800', 'x\uDC00y', '']) {
      try {
        phaseOffset(bad, 60);
        expect.unreachable();
      } catch (err) {
        expect(isDfeError(err, 'HUNT_SPEC_INVALID')).toBe(true);
      }
    }
  });

  it('uses ids as given: no Unicode normalisation', () => {
    expect(phaseOffset('caf\u00e9', 86400)).not.toBe(phaseOffset('cafe\u0301', 86400));
  });
});

describe('latest fire', () => {
  it('worked example (docs/schedule.md#vectors): brute-force-ssh at 300', () => {
    const offset = phaseOffset('brute-force-ssh', 300);
    expect(latestFire(1900000115, 300, offset)).toBe(1899999816);
    expect(latestFire(1900000116, 300, offset)).toBe(1900000116);
    expect(nextFire(1900000115, 300, offset)).toBe(1900000116);
  });
});

describe('due decision', () => {
  const base = { intervalSeconds: 60, phaseOffset: 46 };
  it('is due with no watermark and no lease', () => {
    expect(dueDecision({ ...base, watermark: null, leaseUntil: null }, 1000)).toEqual({ due: true, fire: 946, requested: false });
  });
  it('is not due while a lease is live, due once it lapses', () => {
    expect(dueDecision({ ...base, watermark: null, leaseUntil: 1001 }, 1000)).toEqual({ due: false });
    expect(dueDecision({ ...base, watermark: null, leaseUntil: 1000 }, 1000).due).toBe(true);
  });
  it('a run-now above the watermark is due after the scheduled fire ran', () => {
    const state = { ...base, watermark: 946, leaseUntil: 0, requestedFires: [990, 2000, 900] };
    expect(dueDecision(state, 1000)).toEqual({ due: true, fire: 990, requested: true });
    expect(dueDecision({ ...state, watermark: 990 }, 1000)).toEqual({ due: false });
  });
});
