import type { CurveSettings, HuntLoad, LoadCurve } from './model.js';
import { assertCurveInput, forEachCoveredBucket, geometry, pulseWidth, type Geometry } from './pulse.js';

/**
 * The aggregate load curve over one hyperperiod and its objective (docs/smoothing.md
 * "The curve and the objective"). Pure: the same hunts and settings give the same
 * numbers, which is what lets anyone recompute a plan's `after.flatness`.
 */
export interface SeriesStats { peak: number; mean: number; flatness: number }

/** peak, mean and peak/mean; an all-zero (or empty) series counts as perfectly flat (1). */
export function seriesStats(values: Float64Array): SeriesStats {
  let peak = 0;
  let sum = 0;
  for (const v of values) {
    if (v > peak) peak = v;
    sum += v;
  }
  const mean = values.length === 0 ? 0 : sum / values.length;
  return { peak, mean, flatness: mean > 0 ? peak / mean : 1 };
}

/** C_cap = cores × Δ × 10^6 µs: the CPU the server has in one bucket. */
export function cpuCapacityUs(settings: CurveSettings): number {
  return settings.cpuCores * settings.bucketSeconds * 1e6;
}

/** P(b) from C(b) and M(b); one formula for the curve and the planner. */
export function pressureOf(cpuUs: number, memoryBytes: number, settings: CurveSettings, cpuCapUs: number): number {
  return (settings.weights.cpu * cpuUs) / cpuCapUs + (settings.weights.mem * memoryBytes) / settings.memoryCapBytes;
}

export function sumOfSquares(values: Float64Array): number {
  let j = 0;
  for (const v of values) j += v * v;
  return j;
}

/** C(b) and M(b) in input order; shared with the planner so both sum the same way. */
export function depositAll(hunts: readonly HuntLoad[], g: Geometry, cpu: Float64Array, mem: Float64Array): void {
  for (const hunt of hunts) {
    const width = pulseWidth(hunt.cost.durationMs, g.bucketSeconds);
    const c = hunt.cost.cpuUs / width;
    const m = hunt.cost.memoryBytes;
    forEachCoveredBucket(g, hunt.periodSeconds, hunt.offsetSeconds, width, (b) => {
      cpu[b] = (cpu[b] ?? 0) + c;
      mem[b] = (mem[b] ?? 0) + m;
    });
  }
}

export function buildCurve(hunts: readonly HuntLoad[], settings: CurveSettings): LoadCurve {
  assertCurveInput(hunts, settings);
  const g = geometry(hunts, settings.bucketSeconds);
  const cpu = new Float64Array(g.buckets);
  const mem = new Float64Array(g.buckets);
  depositAll(hunts, g, cpu, mem);
  const cpuCap = cpuCapacityUs(settings);
  const pressure = new Float64Array(g.buckets);
  for (let b = 0; b < g.buckets; b++) pressure[b] = pressureOf(cpu[b] ?? 0, mem[b] ?? 0, settings, cpuCap);
  const p = seriesStats(pressure);
  const memStats = seriesStats(mem);
  return {
    hyperperiodSeconds: g.hyperperiodSeconds,
    bucketSeconds: g.bucketSeconds,
    buckets: g.buckets,
    cpu,
    mem,
    pressure,
    objective: sumOfSquares(pressure),
    flatness: p.flatness,
    peak: p.peak,
    mean: p.mean,
    memoryPeakBytes: memStats.peak,
    cpuStats: seriesStats(cpu),
    memStats,
  };
}
