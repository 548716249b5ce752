import { describe, expect, it } from 'vitest';
import { costFromRuns, fillMissingCosts, fleetMedianCost, p95 } from '../../../src/smoothing/cost.js';
import { buildCurve } from '../../../src/smoothing/curve.js';
import type { HuntLoad, PlannerSettings } from '../../../src/smoothing/model.js';
import { planReport } from '../../../src/smoothing/plan-report.js';
import { planCycles } from '../../../src/smoothing/planner.js';
import { SMALL_FLEET_SETTINGS } from '../../helpers/fleet-arb.js';
import { renderCurve } from '../../../src/smoothing/render.js';

const settings: PlannerSettings = SMALL_FLEET_SETTINGS;
const at = (huntId: string, offsetSeconds: number): HuntLoad => ({
  huntId,
  periodSeconds: 120,
  offsetSeconds,
  movable: true,
  cost: { durationMs: 10_000, cpuUs: 30e6, memoryBytes: 100 },
});

describe('cost', () => {
  it('p95 is nearest-rank: an observed value', () => {
    expect(p95([])).toBe(0);
    expect(p95([7])).toBe(7);
    expect(p95(Array.from({ length: 20 }, (_, i) => i + 1))).toBe(19); // ceil(0.95·20) = 19th
    expect(p95(Array.from({ length: 100 }, (_, i) => 100 - i))).toBe(95);
  });

  it('missing CPU is duration × one core; each figure has its own p95', () => {
    const cost = costFromRuns([
      { durationMs: 2_000, cpuUs: 0, memoryBytes: 10 },
      { durationMs: 1_000, cpuUs: 5_000_000, memoryBytes: 30 },
    ]);
    expect(cost).toEqual({ durationMs: 2_000, cpuUs: 5_000_000, memoryBytes: 30 });
    expect(costFromRuns([{ durationMs: 3_000, cpuUs: 0, memoryBytes: 0 }])?.cpuUs).toBe(3_000_000);
    expect(costFromRuns([])).toBeNull();
  });

  it('a hunt with no runs costs the fleet median; no runs anywhere costs zero', () => {
    const known = { durationMs: 1, cpuUs: 10, memoryBytes: 100 };
    const other = { durationMs: 3, cpuUs: 30, memoryBytes: 300 };
    expect(fleetMedianCost([known, other])).toEqual({ durationMs: 2, cpuUs: 20, memoryBytes: 200 });
    const filled = fillMissingCosts(new Map([['a', known], ['b', other], ['c', null]]), ['a', 'b', 'c', 'd']);
    expect(filled.get('a')).toEqual(known);
    expect(filled.get('c')).toEqual({ durationMs: 2, cpuUs: 20, memoryBytes: 200 });
    expect(filled.get('d')).toEqual({ durationMs: 2, cpuUs: 20, memoryBytes: 200 });
    expect(fillMissingCosts(new Map(), ['x']).get('x')).toEqual({ durationMs: 0, cpuUs: 0, memoryBytes: 0 });
  });
});

describe('plan report (smoothing plan --json)', () => {
  it('has exactly the documented keys, and after.flatness recomputes from after.offsets', () => {
    const hunts = [at('a', 0), at('b', 0), at('c', 60)];
    const report = planReport(planCycles(hunts, settings, 5), settings) as Record<string, unknown>;
    expect(Object.keys(report)).toEqual([
      'bucket_seconds',
      'hyperperiod_seconds',
      'hunts',
      'memory_cap_bytes',
      'before',
      'after',
      'objective_by_cycle',
      'moves',
    ]);
    const before = report.before as Record<string, number>;
    const after = report.after as Record<string, unknown> & { offsets: Record<string, number>; flatness: number };
    expect(Object.keys(before)).toEqual(['objective', 'flatness', 'peak', 'mean', 'memory_peak_bytes']);
    expect(Object.keys(after)).toEqual(['objective', 'flatness', 'peak', 'mean', 'memory_peak_bytes', 'offsets']);
    expect(report).toMatchObject({ bucket_seconds: 30, hyperperiod_seconds: 120, hunts: 3, memory_cap_bytes: 200 });
    expect(before.objective).toBeCloseTo(2.8125, 12);
    expect(report.moves).toEqual([{ cycle: 1, hunt_id: 'a', from: 0, to: 30 }]);
    expect(after.offsets).toEqual({ a: 30, b: 0, c: 60 });
    const recomputed = buildCurve(hunts.map((h) => ({ ...h, offsetSeconds: after.offsets[h.huntId] as number })), settings);
    expect(after.flatness).toBe(recomputed.flatness);
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
  });
});

describe('render', () => {
  it('one block per column, the highest bucket of each column, on a shared scale', () => {
    const before = buildCurve([at('a', 0), at('b', 0), at('c', 60)], settings); // P [1.5, 0, 0.75, 0]
    expect(renderCurve(before, 4)).toBe('█ ▄ ');
    expect(renderCurve(before, 2)).toBe('█▄'); // columns {0,1} and {2,3}: their highest, 1.5 and 0.75
    expect(renderCurve(before, 2, 3)).toBe('▄▂');
    const after = buildCurve([at('a', 30), at('b', 0), at('c', 60)], settings); // P [0.75, 0.75, 0.75, 0]
    // On the scale of the higher curve, as `smoothing plan` draws both.
    expect(renderCurve(after, 4, before.peak)).toBe('▄▄▄ ');
  });
});
