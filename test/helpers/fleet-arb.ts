import fc from 'fast-check';
import { loadConfig } from '../../src/config/load.js';
import type { HuntLoad, PlannerSettings } from '../../src/smoothing/model.js';

/** Small random fleets and settings for the planner's property tests (lcm of periods ≤ 1 800 s). */
export const PERIODS = [45, 60, 90, 100, 120, 300] as const;

export const huntArb = (index: number): fc.Arbitrary<HuntLoad> =>
  fc.constantFrom(...PERIODS).chain((periodSeconds) =>
    fc.record({
      huntId: fc.constant(`h${index}`),
      periodSeconds: fc.constant(periodSeconds),
      offsetSeconds: fc.integer({ min: 0, max: periodSeconds - 1 }),
      movable: fc.integer({ min: 0, max: 4 }).map((n) => n > 0), // one in five pinned
      cost: fc.record({
        durationMs: fc.integer({ min: 0, max: 200_000 }),
        cpuUs: fc.integer({ min: 0, max: 100_000_000 }),
        memoryBytes: fc.integer({ min: 0, max: 300 }),
      }),
    }),
  );

export const fleetArb: fc.Arbitrary<HuntLoad[]> = fc
  .integer({ min: 1, max: 14 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => huntArb(i))));

export const settingsArb: fc.Arbitrary<PlannerSettings> = fc.record({
  bucketSeconds: fc.constantFrom(10, 30, 60),
  cpuCores: fc.integer({ min: 1, max: 4 }),
  memoryCapBytes: fc.integer({ min: 500, max: 4_000 }),
  weights: fc.constantFrom({ cpu: 0.5, mem: 0.5 }, { cpu: 1, mem: 0 }, { cpu: 0.2, mem: 0.8 }),
  maxStepFraction: fc.constantFrom(0.05, 0.125, 0.25, 0.5),
  hysteresis: fc.constantFrom(0, 0.01, 0.1, 0.5), // relative to the moved hunt's part of J
  cooldownCycles: fc.integer({ min: 0, max: 3 }),
});

/** Planner settings for the hand-checked small fleets (Δ 30 s, 1 core, a 200-byte memory cap, the default hysteresis). */
export const SMALL_FLEET_SETTINGS: PlannerSettings = Object.freeze({
  bucketSeconds: 30,
  cpuCores: 1,
  memoryCapBytes: 200,
  weights: { cpu: 0.5, mem: 0.5 },
  maxStepFraction: 0.25,
  hysteresis: loadConfig({}).runner.smoothing.hysteresis,
  cooldownCycles: 3,
});
