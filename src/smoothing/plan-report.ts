import type { PlannerSettings, PlanResult } from './model.js';

/** STUB: the `smoothing plan --json` object (docs/smoothing.md). */
export function planReport(result: PlanResult, settings: PlannerSettings): object {
  return { bucket_seconds: settings.bucketSeconds, hyperperiod_seconds: result.after.hyperperiodSeconds };
}
