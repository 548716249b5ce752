import type { Counter, Gauge } from 'prom-client';

/**
 * Load smoothing and escalation (docs/smoothing.md, "Reading the metrics"): the
 * seed's names, label `hunt_id` like the runner's other metrics. Defined (names,
 * help) in the runner's metrics module; this is the interface the smoothing code
 * writes to, so it never imports the runner. Cost and load
 * gauges are set by the runner that planned the last cycle; counters count what
 * THIS runner did, so sum them over runners.
 */
export type CeilingResource = 'memory' | 'cpu' | 'duration';

export interface SmoothingMetrics {
  readonly phaseShifts: Counter<'hunt_id'>;
  readonly phaseOffset: Gauge<'hunt_id'>;
  readonly intervalBackoffs: Counter<'hunt_id'>;
  readonly intervalSeconds: Gauge<'hunt_id'>;
  readonly promotions: Counter<'hunt_id'>;
  readonly autoDisabled: Gauge<'hunt_id' | 'reason'>;
  readonly costCpuSeconds: Gauge<'hunt_id'>;
  readonly costMemBytes: Gauge<'hunt_id'>;
  readonly costDurationSeconds: Gauge<'hunt_id'>;
  readonly loadCpu: Gauge<'stat'>;
  readonly loadMem: Gauge<'stat'>;
  readonly loadPressure: Gauge<'stat'>;
  readonly objective: Gauge;
  readonly flatness: Gauge;
  readonly projectedFlatness: Gauge;
  readonly memLimit: Counter<'hunt_id'>;
  readonly memLimitCrashloops: Counter<'hunt_id'>;
  readonly thresholdBreaches: Counter<'hunt_id' | 'resource'>;
}
