import type { LoadCurve, PlannerSettings, PlanResult } from './model.js';

/**
 * The object `dfe-hunt-runner smoothing plan --json` prints (docs/smoothing.md "Plan report").
 * Keys and their order are the contract; `after` is the curve recomputed from `after.offsets`
 * (buildCurve), so anyone holding the offsets and costs gets the same flatness.
 */
function curveSummary(curve: LoadCurve): Record<string, number> {
  return {
    objective: curve.objective,
    flatness: curve.flatness,
    peak: curve.peak,
    mean: curve.mean,
    memory_peak_bytes: curve.memoryPeakBytes,
  };
}

export function planReport(result: PlanResult, settings: PlannerSettings): object {
  return {
    bucket_seconds: settings.bucketSeconds,
    hyperperiod_seconds: result.after.hyperperiodSeconds,
    hunts: result.hunts.length,
    memory_cap_bytes: settings.memoryCapBytes,
    before: curveSummary(result.before),
    after: {
      ...curveSummary(result.after),
      offsets: Object.fromEntries(result.hunts.map((h) => [h.huntId, h.offsetSeconds])),
    },
    objective_by_cycle: [...result.objectiveByCycle],
    moves: result.moves.map((m) => ({ cycle: m.cycle, hunt_id: m.huntId, from: m.from, to: m.to })),
  };
}
