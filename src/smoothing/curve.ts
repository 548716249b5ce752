import type { CurveSettings, HuntLoad, LoadCurve } from './model.js';

/** STUB: replaced by the real curve (docs/smoothing.md). */
export function buildCurve(_hunts: readonly HuntLoad[], settings: CurveSettings): LoadCurve {
  const zero = { peak: 0, mean: 0, flatness: 1 };
  return {
    hyperperiodSeconds: 0, bucketSeconds: settings.bucketSeconds, buckets: 0,
    cpu: new Float64Array(0), mem: new Float64Array(0), pressure: new Float64Array(0),
    objective: 0, flatness: 1, peak: 0, mean: 0, memoryPeakBytes: 0, cpuStats: zero, memStats: zero,
  };
}
