import { describe, expect, it } from 'vitest';
import { isDfeError } from '../../../src/errors.js';
import { buildCurve } from '../../../src/smoothing/curve.js';
import type { CurveSettings, HuntLoad } from '../../../src/smoothing/model.js';

// docs/smoothing.md "The curve and the objective": every expected number below is worked by hand.
const settings: CurveSettings = { bucketSeconds: 30, cpuCores: 1, memoryCapBytes: 200, weights: { cpu: 0.5, mem: 0.5 } };
const hunt = (huntId: string, periodSeconds: number, offsetSeconds: number, durationMs: number, cpuUs: number, memoryBytes: number): HuntLoad => ({
  huntId,
  periodSeconds,
  offsetSeconds,
  movable: true,
  cost: { durationMs, cpuUs, memoryBytes },
});

describe('buildCurve', () => {
  it('two hunts: H = lcm, pulses, P, J and flatness', () => {
    // A: T 60, φ 0, 45 s → d 2; fires 0, 60, 120 → buckets {0,1} {2,3} {4,5}; 30e6 µs per bucket, 100 B.
    // B: T 90, φ 40, 10 s → d 1; fires 40, 130 → buckets 1 and 4; 30e6 µs, 50 B.
    const curve = buildCurve([hunt('a', 60, 0, 45_000, 60e6, 100), hunt('b', 90, 40, 10_000, 30e6, 50)], settings);
    expect(curve.hyperperiodSeconds).toBe(180);
    expect(curve.buckets).toBe(6);
    expect([...curve.cpu]).toEqual([30e6, 60e6, 30e6, 30e6, 60e6, 30e6]);
    expect([...curve.mem]).toEqual([100, 150, 100, 100, 150, 100]);
    // C_cap = 1 core × 30 s × 1e6 = 30e6; P = 0.5·C/30e6 + 0.5·M/200.
    expect([...curve.pressure]).toEqual([0.75, 1.375, 0.75, 0.75, 1.375, 0.75]);
    expect(curve.objective).toBeCloseTo(4 * 0.5625 + 2 * 1.890625, 12); // 6.03125
    expect(curve.peak).toBe(1.375);
    expect(curve.mean).toBeCloseTo(5.75 / 6, 12);
    expect(curve.flatness).toBeCloseTo(8.25 / 5.75, 12); // 1.4348
    expect(curve.memoryPeakBytes).toBe(150);
    expect(curve.cpuStats.peak).toBe(60e6);
    expect(curve.cpuStats.mean).toBeCloseTo(40e6, 3);
    expect(curve.cpuStats.flatness).toBeCloseTo(1.5, 12);
    expect(curve.memStats.flatness).toBeCloseTo(900 / 700, 12);
  });

  it('a pulse wraps round the end of the hyperperiod', () => {
    // T 120, φ 100, 61 s → d 3, starting in bucket 3 of 4: covers 3, 0, 1 with 90e6 / 3 each.
    const curve = buildCurve([hunt('w', 120, 100, 61_000, 90e6, 10)], settings);
    expect(curve.buckets).toBe(4);
    expect([...curve.cpu]).toEqual([30e6, 30e6, 0, 30e6]);
    expect([...curve.mem]).toEqual([10, 10, 0, 10]);
  });

  it('a zero-length run still covers one bucket', () => {
    const curve = buildCurve([hunt('z', 60, 59, 0, 6e6, 1)], settings);
    expect([...curve.cpu]).toEqual([0, 6e6]); // φ 59 is in bucket 1 of 2
  });

  it('H is capped at 7 days; a fire past the cap does not count', () => {
    // lcm(604800, 11) > 604800 → H = 604800. T 11 from φ 0: k = 0..54981 (54 982 fires);
    // from φ 10 the last fire 10 + 11·54981 = 604801 ≥ H drops off (54 981 fires).
    const total = (offset: number): number => {
      const curve = buildCurve([hunt('week', 604_800, 0, 0, 0, 0), hunt('odd', 11, offset, 0, 1, 0)], settings);
      expect(curve.hyperperiodSeconds).toBe(604_800);
      expect(curve.buckets).toBe(20_160);
      return curve.cpu.reduce((a, b) => a + b, 0);
    };
    expect(total(0)).toBe(54_982);
    expect(total(10)).toBe(54_981);
  });

  it('H not a multiple of Δ: B = ceil(H / Δ)', () => {
    const curve = buildCurve([hunt('h', 45, 44, 0, 1, 0)], settings);
    expect(curve.hyperperiodSeconds).toBe(45);
    expect(curve.buckets).toBe(2);
    expect([...curve.cpu]).toEqual([0, 1]);
  });

  it('an empty or all-zero curve has flatness 1 by definition', () => {
    expect(buildCurve([], settings).flatness).toBe(1);
    const zero = buildCurve([hunt('idle', 300, 0, 0, 0, 0)], settings);
    expect([zero.flatness, zero.cpuStats.flatness, zero.memStats.flatness, zero.objective]).toEqual([1, 1, 1, 0]);
  });

  it('rejects bad input with a typed error naming key and value', () => {
    const bad: Array<[HuntLoad[], CurveSettings, string]> = [
      [[hunt('x', 60, 60, 0, 0, 0)], settings, 'phase_offset'],
      [[hunt('x', 0, 0, 0, 0, 0)], settings, 'interval'],
      [[hunt('x', 60, 0, Number.NaN, 0, 0)], settings, 'cost.durationMs'],
      [[hunt('x', 60, 0, 0, 0, 0), hunt('x', 60, 0, 0, 0, 0)], settings, 'hunt_id'],
      [[], { ...settings, bucketSeconds: 0.5 }, 'bucket_seconds'],
      [[], { ...settings, memoryCapBytes: 0 }, 'memory_cap_bytes'],
    ];
    for (const [hunts, s, key] of bad) {
      let caught: unknown;
      try {
        buildCurve(hunts, s);
      } catch (err) {
        caught = err;
      }
      expect(isDfeError(caught) && caught.key === key).toBe(true);
    }
  });
});
