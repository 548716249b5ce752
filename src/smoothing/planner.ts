import { buildCurve } from './curve.js';
import type { CooldownState, CycleResult, HuntLoad, PlannerSettings, PlanResult } from './model.js';

/** STUB: replaced by the real controller (docs/smoothing.md). */
export function planCycle(hunts: readonly HuntLoad[], settings: PlannerSettings, _cycle: number, cooldown: CooldownState): CycleResult {
  return { move: null, hunts, cooldown, objective: buildCurve(hunts, settings).objective };
}

/** STUB: replaced by the real controller (docs/smoothing.md). */
export function planCycles(hunts: readonly HuntLoad[], settings: PlannerSettings, _cycles: number, _cooldown: CooldownState = new Map(), _startCycle = 1): PlanResult {
  const c = buildCurve(hunts, settings);
  return { before: c, after: c, hunts, moves: [], objectiveByCycle: [] };
}
