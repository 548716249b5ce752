import type { HuntCost } from './model.js';

/**
 * Pure cost arithmetic (docs/smoothing.md "Cost model"): the I/O side fetches one hunt's runs
 * over the cost window; this turns them into the p95 figures the curve uses.
 */
export interface RunSample {
  readonly durationMs: number;
  /** 0 when the source did not report CPU. */
  readonly cpuUs: number;
  readonly memoryBytes: number;
}

/** Nearest-rank p95 (an observed value, never interpolated); 0 for no values. */
export function p95(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(0.95 * sorted.length) - 1] as number;
}

/** CPU of a run, or its duration × one core (1 000 µs per ms) when CPU is missing. */
export function runCpuUs(run: RunSample): number {
  return run.cpuUs > 0 ? run.cpuUs : run.durationMs * 1000;
}

/** p95 of each figure over the runs, each taken on its own; null when there are no runs. */
export function costFromRuns(runs: readonly RunSample[]): HuntCost | null {
  if (runs.length === 0) return null;
  return {
    durationMs: p95(runs.map((r) => r.durationMs)),
    cpuUs: p95(runs.map(runCpuUs)),
    memoryBytes: p95(runs.map((r) => r.memoryBytes)),
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Median of each figure over the hunts that have a cost; null when none has. */
export function fleetMedianCost(costs: Iterable<HuntCost>): HuntCost | null {
  const known = [...costs];
  if (known.length === 0) return null;
  return {
    durationMs: median(known.map((c) => c.durationMs)),
    cpuUs: median(known.map((c) => c.cpuUs)),
    memoryBytes: median(known.map((c) => c.memoryBytes)),
  };
}

const ZERO_COST: HuntCost = Object.freeze({ durationMs: 0, cpuUs: 0, memoryBytes: 0 });

/**
 * A cost for every hunt in `huntIds`: its own where known, else the fleet median (a hunt
 * with no runs yet); when no hunt has run at all, zero (nothing to smooth yet).
 */
export function fillMissingCosts(costs: ReadonlyMap<string, HuntCost | null>, huntIds: readonly string[]): Map<string, HuntCost> {
  const known = [...costs.values()].filter((c): c is HuntCost => c !== null);
  const fill = fleetMedianCost(known) ?? ZERO_COST;
  return new Map(huntIds.map((id) => [id, costs.get(id) ?? fill]));
}
