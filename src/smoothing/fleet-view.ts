import type { OffsetSource } from '../coordination/materialise.js';
import type { SmoothingConfig } from '../config/load.js';
import type { CostSource } from './store/cost-source.js';
import type { DisabledHunt } from './store/hunt-state.js';
import type { CooldownState, HuntCost, HuntLoad, PlannerSettings } from './model.js';

/**
 * What the planner plans on (docs/smoothing.md): the live schedule, who is
 * disabled, and the cost model, read from ClickHouse in one go. The controller,
 * `smoothing plan|apply|status|export` all start here.
 */
export interface FleetView {
  readonly schedule: readonly ScheduleEntry[];
  readonly disabled: readonly DisabledHunt[];
  readonly costSource: CostSource;
  /** p95 costs of the hunts with runs in the window. */
  readonly measured: ReadonlyMap<string, HuntCost>;
  readonly runs: ReadonlyMap<string, number>;
  /** Every live hunt's cost, the fleet median where it has no runs yet. */
  readonly costs: ReadonlyMap<string, HuntCost>;
  /** The ClickHouse clock when read, epoch seconds. */
  readonly serverNowSeconds: number;
}

/** The live hunt_schedule row of one hunt (the latest, enabled, with an interval). */
export interface ScheduleEntry {
  readonly huntId: string;
  readonly intervalSeconds: number;
  readonly phaseOffset: number;
  readonly offsetSource: OffsetSource;
  /** moved_at in epoch ms; 0 = never moved by the controller. */
  readonly movedAtMs: number;
}

/** The planner's input (pure): pinned and disabled hunts load the curve but never move. */
export function huntLoads(view: FleetView): HuntLoad[] {
  const disabled = new Set(view.disabled.map((d) => d.huntId));
  const out: HuntLoad[] = [];
  for (const e of view.schedule) {
    const cost = view.costs.get(e.huntId);
    if (!cost) continue;
    out.push({
      huntId: e.huntId,
      periodSeconds: e.intervalSeconds,
      offsetSeconds: e.phaseOffset,
      movable: e.offsetSource !== 'pinned' && !disabled.has(e.huntId),
      cost,
    });
  }
  return out;
}

/** Planning cycle number of an instant: cycles are wall-clock slots of cycle_seconds. */
export function cycleAt(epochSeconds: number, cycleSeconds: number): number {
  return Math.floor(epochSeconds / cycleSeconds);
}

/** Cool-down memory derived from moved_at, so it survives restarts and planner hand-overs. */
export function cooldownFromSchedule(schedule: readonly ScheduleEntry[], cycleSeconds: number): CooldownState {
  const out = new Map<string, number>();
  for (const e of schedule) if (e.movedAtMs > 0) out.set(e.huntId, cycleAt(e.movedAtMs / 1000, cycleSeconds));
  return out;
}

/** Settled (docs/smoothing.md): a learned offset not moved for settling_seconds; export promotes it. */
export function settledHunts(schedule: readonly ScheduleEntry[], nowSeconds: number, settlingSeconds: number): ScheduleEntry[] {
  return schedule.filter((e) => e.offsetSource === 'learned' && e.movedAtMs > 0 && nowSeconds - e.movedAtMs / 1000 >= settlingSeconds);
}

export interface Capacity {
  readonly memoryCapBytes: number;
  readonly cpuCores: number;
  /** Where each came from, for `smoothing status`. */
  readonly memoryFrom: 'setting' | 'server' | 'default';
  readonly cpuFrom: 'setting' | 'server' | 'default';
}

/** Used when neither the setting nor the server tells (docs/smoothing.md). */
export const DEFAULT_MEMORY_CAP_BYTES = 8 * 1024 ** 3;
export const DEFAULT_CPU_CORES = 1;

export function plannerSettings(config: SmoothingConfig, capacity: Capacity): PlannerSettings {
  return {
    bucketSeconds: config.bucketSeconds,
    cpuCores: capacity.cpuCores,
    memoryCapBytes: capacity.memoryCapBytes,
    weights: config.weights,
    maxStepFraction: config.maxStepFraction,
    hysteresis: config.hysteresis,
    cooldownCycles: config.cooldownCycles,
  };
}
