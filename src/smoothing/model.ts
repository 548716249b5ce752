// Types shared by the load-smoothing planner (pure) and its I/O, runner and CLI.
// The maths is in docs/smoothing.md; these names are the contract between the two halves.

/** p95 figures of one hunt's runs (docs/smoothing.md "Cost model"). */
export interface HuntCost { readonly durationMs: number; readonly cpuUs: number; readonly memoryBytes: number }

export interface HuntLoad {
  readonly huntId: string;
  readonly periodSeconds: number;   // effective interval (after any back-off)
  readonly offsetSeconds: number;   // 0 <= offset < period
  readonly movable: boolean;        // false for pinned or disabled-but-still-loading hunts
  readonly cost: HuntCost;          // p95 figures
}

export interface CurveSettings {
  readonly bucketSeconds: number;       // Δ, default 30
  readonly cpuCores: number;            // C_cap = cpuCores × Δ × 1e6
  readonly memoryCapBytes: number;      // M_cap
  readonly weights: { readonly cpu: number; readonly mem: number }; // default 0.5/0.5
}

export interface PlannerSettings extends CurveSettings {
  readonly maxStepFraction: number;     // default 0.25 (max_step = floor(T × fraction), at least 1 s)
  readonly hysteresis: number;          // commit only if J falls by > hysteresis × J_i, J_i = Σ_b 2·P(b)·p_i(b) the moved hunt's part of J
  readonly cooldownCycles: number;      // default 3
}

export interface LoadCurve {
  readonly hyperperiodSeconds: number; readonly bucketSeconds: number; readonly buckets: number;
  readonly cpu: Float64Array; readonly mem: Float64Array; readonly pressure: Float64Array;
  readonly objective: number; readonly flatness: number; readonly peak: number; readonly mean: number;
  readonly memoryPeakBytes: number;
  readonly cpuStats: { peak: number; mean: number; flatness: number };
  readonly memStats: { peak: number; mean: number; flatness: number };
}

export interface PhaseMove { readonly cycle: number; readonly huntId: string; readonly from: number; readonly to: number }

/** Cool-down memory between cycles: huntId -> cycle number of its last move. */
export type CooldownState = ReadonlyMap<string, number>;

export interface CycleResult {
  readonly move: PhaseMove | null;      // null: nothing improves J by more than the hysteresis
  readonly hunts: readonly HuntLoad[];  // hunts with the move applied
  readonly cooldown: CooldownState;
  readonly objective: number;           // J after the cycle
}

export interface PlanResult {
  readonly before: LoadCurve; readonly after: LoadCurve;
  readonly hunts: readonly HuntLoad[];  // final offsets
  readonly moves: readonly PhaseMove[]; readonly objectiveByCycle: readonly number[];
}
