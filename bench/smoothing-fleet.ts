import { loadConfig } from '../src/config/load.js';
import type { HuntLoad, PlannerSettings } from '../src/smoothing/model.js';
import { seededRandom } from '../src/runner/nemesis/plan.js';

/**
 * Synthetic rate-hunt fleets for the smoothing bench: periods 300/900/3600 s, log-normal
 * costs from a seeded PRNG (the nemesis plan's mulberry32), so every run plans the same fleet.
 */

function logNormal(random: () => number, median: number, sigma: number): number {
  const u = Math.max(random(), Number.MIN_VALUE);
  const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  return median * Math.exp(sigma * z);
}

export const FLEET_PERIODS = [300, 900, 3600] as const;

export interface FleetHunt {
  readonly huntId: string;
  readonly periodSeconds: number;
  readonly cost: HuntLoad['cost'];
}

/** Duration median 8 s, CPU ≈ duration × one core × log-normal, memory median 256 MiB (σ 1). */
export function syntheticFleet(size: number, seed = 11): FleetHunt[] {
  const random = seededRandom(seed);
  return Array.from({ length: size }, (_, i) => {
    const durationMs = Math.round(logNormal(random, 8_000, 1));
    return {
      huntId: `hunt-${String(i).padStart(5, '0')}`,
      periodSeconds: FLEET_PERIODS[Math.floor(random() * FLEET_PERIODS.length)] as number,
      cost: {
        durationMs,
        cpuUs: Math.round(durationMs * 1000 * logNormal(random, 1, 0.5)),
        memoryBytes: Math.round(logNormal(random, 256 * 2 ** 20, 1)),
      },
    };
  });
}

export function withOffsets(fleet: readonly FleetHunt[], offset: (hunt: FleetHunt) => number): HuntLoad[] {
  return fleet.map((hunt) => ({ ...hunt, offsetSeconds: offset(hunt), movable: true }));
}

/**
 * Settings sized to the fleet: CPU cores so that the mean CPU load is 30% of capacity, and a
 * memory cap 2.5 × the mean concurrent memory (the cap binds at the boundary start, not
 * at a hashed one). The controller's settings are the runner's defaults.
 */
export function fleetSettings(fleet: readonly FleetHunt[], hyperperiodSeconds: number, bucketSeconds = 30): PlannerSettings {
  let cpuUsPerHour = 0;
  let memoryBucketBytes = 0;
  for (const hunt of fleet) {
    const fires = hyperperiodSeconds / hunt.periodSeconds;
    const width = Math.max(1, Math.ceil(hunt.cost.durationMs / 1000 / bucketSeconds));
    cpuUsPerHour += fires * hunt.cost.cpuUs;
    memoryBucketBytes += fires * width * hunt.cost.memoryBytes;
  }
  const buckets = hyperperiodSeconds / bucketSeconds;
  const { maxStepFraction, hysteresis, cooldownCycles } = loadConfig({}).runner.smoothing;
  return {
    bucketSeconds,
    cpuCores: cpuUsPerHour / buckets / (bucketSeconds * 1e6) / 0.3,
    memoryCapBytes: Math.round((2.5 * memoryBucketBytes) / buckets),
    weights: { cpu: 0.5, mem: 0.5 },
    maxStepFraction,
    hysteresis,
    cooldownCycles,
  };
}
