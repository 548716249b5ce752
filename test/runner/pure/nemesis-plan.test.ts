import { describe, expect, it } from 'vitest';
import { DfeError } from '../../../src/errors.js';
import { faultDurationMs, parseFaultKinds, planFaults, seededRandom } from '../../../src/runner/nemesis/plan.js';

/** The nemesis' plan (docs/operations.md#the-nemesis): which faults, when, for how long. */
describe('the nemesis plan', () => {
  it('parses a list of kinds; an unknown, repeated or empty list is a usage error naming it', () => {
    expect(parseFaultKinds('pause, cpu,stall,kill')).toEqual(['pause', 'cpu', 'stall', 'kill']);
    expect(() => parseFaultKinds('pause,nap')).toThrow(/unknown fault "nap" in "pause,nap"; known: pause, cpu, stall, kill/);
    expect(() => parseFaultKinds('cpu,cpu')).toThrow(/names a fault twice: "cpu,cpu"/);
    expect(() => parseFaultKinds(' , ')).toThrow(DfeError);
  });

  it('the same seed gives the same plan; another seed another', () => {
    const o = { kinds: parseFaultKinds('pause,cpu,stall,kill'), runMs: 60_000, leaseSeconds: 5 };
    expect(planFaults({ ...o, seed: 42 })).toEqual(planFaults({ ...o, seed: 42 }));
    expect(planFaults({ ...o, seed: 42 })).not.toEqual(planFaults({ ...o, seed: 43 }));
    const a = seededRandom(1);
    const draws = Array.from({ length: 1000 }, () => a());
    expect(draws.every((d) => d >= 0 && d < 1)).toBe(true);
  });

  it('every kind at least once, one fault per 10 s, in order within the run; a pause outlives twice the lease', () => {
    for (let seed = 0; seed < 50; seed += 1) {
      const plan = planFaults({ seed, kinds: ['pause', 'cpu', 'stall', 'kill'], runMs: 60_000, leaseSeconds: 5 });
      expect(plan).toHaveLength(6);
      expect(new Set(plan.map((f) => f.kind))).toEqual(new Set(['pause', 'cpu', 'stall', 'kill']));
      const times = plan.map((f) => f.atMs);
      expect(times).toEqual([...times].sort((x, y) => x - y));
      expect(times.every((t) => t >= 2000 && t < 60_000)).toBe(true);
      expect(plan.every((f) => f.pick >= 0 && f.pick < 1)).toBe(true);
    }
    expect(planFaults({ seed: 1, kinds: ['kill'], runMs: 15_000, leaseSeconds: 5 })).toHaveLength(1);
    expect(faultDurationMs('pause', 5)).toBeGreaterThan(2 * 5000);
    expect(faultDurationMs('stall', 5)).toBe(10_000);
  });
});
