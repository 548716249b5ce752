import { candidateOffsets, circularDistance, maxStepSeconds } from './candidates.js';
import { buildCurve } from './curve.js';
import type { CooldownState, CycleResult, HuntLoad, PhaseMove, PlannerSettings, PlanResult } from './model.js';
import { CurveState } from './state.js';

/**
 * The damped, one-at-a-time controller (docs/smoothing.md "The controller"): per cycle at most
 * one movable hunt, not cooling down, moves by at most max_step, and only when J falls by more
 * than the hysteresis times the hunt's own part of J. The peak bucket's hunts are tried first,
 * then the next-highest bucket's, and so on.
 */

/**
 * Below this gain relative to the whole J a "gain" is rounding noise, whatever the hysteresis
 * says: ΔJ is summed from terms of the size of P(b)², so its error scales with J, not J_i.
 */
const NOISE = 1e-12;

/**
 * The least fall of J that commits hunt i's move: hysteresis × J_i, where J_i = Σ_b 2·P(b)·p_i(b)
 * is the hunt's own part of J. Relative to the hunt, not to the whole J: a hunt's share of J
 * shrinks as the fleet grows, so a margin on the whole J would stop a large fleet early (at
 * 10 000 hunts, 0.001 × J stopped the bench fleet at peak/mean 1.35). Never below rounding noise.
 */
function moveThreshold(hysteresis: number, partOfJ: number, objective: number): number {
  return Math.max(hysteresis * partOfJ, NOISE * objective);
}

interface Found { readonly hunt: number; readonly offset: number }

/** The best feasible offset for hunt i if it beats the threshold, else null. */
function bestMove(state: CurveState, i: number, removal: number, settings: PlannerSettings, threshold: number): number | null {
  const hunt = state.hunts[i] as HuntLoad;
  const period = hunt.periodSeconds;
  const step = maxStepSeconds(period, settings.maxStepFraction);
  let best: { offset: number; deltaJ: number; distance: number } | null = null;
  for (const offset of candidateOffsets(hunt.offsetSeconds, period, step, state.g.bucketSeconds, state.g.hyperperiodSeconds)) {
    const deltaJ = state.tryOffset(i, offset, removal);
    if (deltaJ === null || (best !== null && deltaJ > best.deltaJ)) continue;
    const distance = circularDistance(offset, hunt.offsetSeconds, period);
    // Equal J: the shorter move, then the lower offset.
    if (best === null || deltaJ < best.deltaJ || (deltaJ === best.deltaJ && (distance < best.distance || (distance === best.distance && offset < best.offset)))) {
      best = { offset, deltaJ, distance };
    }
  }
  return best !== null && best.deltaJ < -threshold ? best.offset : null;
}

/**
 * Tries the hunts of bucket b, largest marginal term first, until one has a move; marks them
 * tried. The marginal term is the hunt's term in bucket b's P(b)², P(b)² − (P(b) − s)², which
 * grows with its share s of P(b): the hunt that lifts this bucket most goes first. (Ranking by
 * the hunt's term in the whole of J instead favours short-period hunts whose many fires sit
 * mostly elsewhere; on the bench fleets that stops higher: 1 000 hunts 1.073 against 1.063.)
 * Ties: the larger term in J, then input order.
 */
function searchBucket(state: CurveState, b: number, settings: PlannerSettings, eligible: Uint8Array, tried: Uint8Array): Found | null {
  const ranked: Array<{ hunt: number; share: number; removal: number; threshold: number }> = [];
  for (const i of state.cover[b] ?? []) {
    if (tried[i] === 1) continue;
    tried[i] = 1;
    if (eligible[i] !== 1) continue;
    const removal = state.beginTrials(i);
    const share = state.shareOf(i, b);
    const threshold = moveThreshold(settings.hysteresis, state.partOfJ(i), state.objective);
    state.endTrials();
    ranked.push({ hunt: i, share, removal, threshold });
  }
  ranked.sort((x, y) => y.share - x.share || x.removal - y.removal || x.hunt - y.hunt);
  for (const { hunt, removal, threshold } of ranked) {
    state.beginTrials(hunt);
    const offset = bestMove(state, hunt, removal, settings, threshold);
    state.endTrials();
    if (offset !== null) return { hunt, offset };
  }
  return null;
}

/** One cycle on a live state; returns the move made, if any. */
function cycleOn(state: CurveState, settings: PlannerSettings, cycle: number, cooldown: CooldownState): PhaseMove | null {
  const eligible = state.eligible(cycle, cooldown);
  const tried = new Uint8Array(state.hunts.length);
  const pressure = state.pressure;
  // The peak first (the common case: it has a move), then the rest by falling pressure.
  let peak = 0;
  for (let b = 1; b < pressure.length; b++) if ((pressure[b] ?? 0) > (pressure[peak] ?? 0)) peak = b;
  if ((pressure[peak] ?? 0) <= 0) return null;
  let found = searchBucket(state, peak, settings, eligible, tried);
  if (found === null) {
    const order = Array.from({ length: pressure.length }, (_, b) => b).filter((b) => b !== peak && (pressure[b] ?? 0) > 0);
    order.sort((x, y) => (pressure[y] ?? 0) - (pressure[x] ?? 0) || x - y);
    for (const b of order) {
      found = searchBucket(state, b, settings, eligible, tried);
      if (found !== null) break;
    }
  }
  if (found === null) return null;
  const hunt = state.hunts[found.hunt] as HuntLoad;
  state.move(found.hunt, found.offset);
  return { cycle, huntId: hunt.huntId, from: hunt.offsetSeconds, to: found.offset };
}

/** Cool-down after a cycle: the move recorded, entries that can no longer matter dropped. */
function nextCooldown(cooldown: CooldownState, move: PhaseMove | null, cycle: number, cycles: number): Map<string, number> {
  const next = new Map<string, number>();
  for (const [id, last] of cooldown) if (cycle + 1 - last <= cycles) next.set(id, last);
  if (move !== null && cycles > 0) next.set(move.huntId, cycle);
  return next;
}

export function planCycle(hunts: readonly HuntLoad[], settings: PlannerSettings, cycle: number, cooldown: CooldownState): CycleResult {
  const state = new CurveState(hunts, settings);
  const move = cycleOn(state, settings, cycle, cooldown);
  return {
    move,
    hunts: move === null ? [...hunts] : state.hunts,
    cooldown: nextCooldown(cooldown, move, cycle, settings.cooldownCycles),
    objective: state.objective,
  };
}

/**
 * `cycles` cycles from `startCycle`. Stops early once a cycle in which no hunt was cooling
 * down moves nothing: every later cycle would be the same, so `objectiveByCycle` may be shorter.
 */
export function planCycles(
  hunts: readonly HuntLoad[],
  settings: PlannerSettings,
  cycles: number,
  cooldown: CooldownState = new Map(),
  startCycle = 1,
): PlanResult {
  const before = buildCurve(hunts, settings);
  const state = new CurveState(hunts, settings);
  const moves: PhaseMove[] = [];
  const objectiveByCycle: number[] = [];
  let cool: CooldownState = cooldown;
  for (let cycle = startCycle; cycle < startCycle + cycles; cycle++) {
    // Converged only when a cycle found no move with every hunt eligible: a hunt whose
    // cool-down ends after this cycle was not tried in it.
    const everyHuntTried = ![...cool.values()].some((last) => cycle - last <= settings.cooldownCycles);
    const move = cycleOn(state, settings, cycle, cool);
    if (move !== null) moves.push(move);
    objectiveByCycle.push(state.objective);
    cool = nextCooldown(cool, move, cycle, settings.cooldownCycles);
    if (move === null && everyHuntTried) break;
  }
  const final = [...state.hunts];
  return { before, after: buildCurve(final, settings), hunts: final, moves, objectiveByCycle };
}
