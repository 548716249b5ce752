import type { ClickHouseClient } from '@clickhouse/client';
import type { SmoothingConfig } from '../../config/load.js';
import { claimFires, type ClaimTiming } from '../../coordination/claims/table-claims.js';
import type { Coordinator } from '../../coordination/coordinator.js';
import { MAX_BACKOFF_FACTOR } from '../../coordination/materialise.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import type { Logger } from '../../log.js';
import { buildCurve } from '../curve.js';
import { cycleAt, type FleetView } from '../fleet-view.js';
import type { SmoothingMetrics } from '../metrics.js';
import type { HuntLoad, LoadCurve, PhaseMove, PlannerSettings } from '../model.js';
import { planCycle, planCycles } from '../planner.js';
import { writeScheduleMove } from '../store/fleet.js';
import { markBackoff } from '../store/hunt-state.js';
import type { Escalation } from './escalation.js';
import { PlanningReader } from './planning.js';

/**
 * Cycles `observe` simulates ahead for its projected flatness (one hour at the default
 * 300 s cycle); the simulation stops early once the plan converges.
 */
const OBSERVE_HORIZON_CYCLES = 12;

/**
 * The smoothing controller in the runner (docs/smoothing.md, "The controller"):
 * it runs in the `observe` and `on` states (DFE_HUNT_SMOOTHING); `observe` reads,
 * publishes and logs what it would move, and writes no offset. Cycles are wall-clock slots of
 * cycle_seconds on the ClickHouse clock. In each slot exactly one runner plans:
 * it claims the pseudo-hunt PLANNER_ID through the same claim protocol as a hunt
 * fire (free read, conditional insert, settle, read-back), with the slot number
 * as the fire; the watermark of PLANNER_ID says a slot was planned, so a peer
 * that wins the same slot later does nothing. The winner runs ONE planCycle and
 * commits at most one move as a new hunt_schedule row; the due SQL and every
 * runner use it from their next tick. Cool-down comes from moved_at, so it
 * survives restarts and hand-overs between runners.
 */
export const PLANNER_ID = 'smoothing/planner'; // a '/' can never be a hunt id (hunt ids are file stems)

export interface ControllerDeps {
  readonly client: ClickHouseClient;
  readonly database: string;
  readonly settings: CoordinationSettings;
  readonly config: SmoothingConfig;
  readonly escalation: Escalation;
  readonly metrics: SmoothingMetrics;
  readonly log: Logger;
  readonly runnerId: string;
  readonly timing: ClaimTiming;
  /** Configured interval of a hunt (its file), for the back-off bound; undefined when unknown here. */
  readonly configuredInterval: (huntId: string) => number | undefined;
}

export type CycleOutcome =
  | { readonly kind: 'not-planner' }
  | { readonly kind: 'planned'; readonly cycle: number; readonly move: PhaseMove | null; readonly backoffs: readonly string[]; readonly flatness: number }
  | { readonly kind: 'observed'; readonly cycle: number; readonly wouldMove: readonly PhaseMove[]; readonly flatness: number; readonly projectedFlatness: number };

export class SmoothingController {
  private lastCycle = Number.NEGATIVE_INFINITY;
  private readonly reader: PlanningReader;
  private running: Promise<CycleOutcome | undefined> | undefined;

  constructor(private readonly deps: ControllerDeps) {
    this.reader = new PlanningReader(deps.client, deps.database, deps.settings, deps.config);
  }

  /** At most once per slot per runner, never two at once; never throws (logs instead). */
  maybePlan(coord: Coordinator, serverNowSeconds: number): Promise<CycleOutcome | undefined> {
    const cycle = cycleAt(serverNowSeconds, this.deps.config.cycleSeconds);
    if (this.running || cycle <= this.lastCycle) return this.running ?? Promise.resolve(undefined);
    this.lastCycle = cycle;
    this.running = this.claimAndPlan(coord, cycle)
      .catch((err: unknown) => {
        this.deps.log.warn({ cycle, err }, 'smoothing cycle failed; the next slot tries again');
        return undefined;
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async claimAndPlan(coord: Coordinator, cycle: number): Promise<CycleOutcome> {
    const { runnerId, timing } = this.deps;
    // One slot long: a late claim (never released, by the protocol) then blocks only its own slot.
    const leaseSeconds = Math.max(1, Math.ceil(this.deps.config.cycleSeconds));
    const outcome = (await claimFires(coord, runnerId, [{ huntId: PLANNER_ID, fire: cycle }], { ...timing, leaseSeconds })).get(PLANNER_ID);
    if (outcome?.kind !== 'won') return { kind: 'not-planner' };
    const wonMs = timing.clock.nowMs();
    try {
      if (outcome.watermark !== null && outcome.watermark >= cycle) return { kind: 'not-planner' };
      // A plan that outlived most of its lease is dropped, not committed: a peer may plan the next slot by now.
      const result = await this.planOnce(cycle, () => timing.clock.nowMs() - wonMs < leaseSeconds * 800);
      await coord.setWatermark(PLANNER_ID, cycle);
      return result;
    } finally {
      // Conditional: a planner that outlived its slot never frees a peer's.
      await coord.putLeasesIfNewest(runnerId, [{ huntId: PLANNER_ID, fire: cycle }], 'release');
    }
  }

  private async planOnce(cycle: number, stillHeld: () => boolean): Promise<CycleOutcome> {
    if (this.deps.config.mode === 'observe') return this.observeOnce(cycle);
    const { client, database, settings, log } = this.deps;
    let input = await this.reader.read();
    const disabledNow = await this.deps.escalation.checkCeilings(input.view.measured, new Set(input.view.disabled.map((d) => d.huntId)));
    const backoffs = await this.backOff(input.view);
    if (disabledNow.length > 0 || backoffs.length > 0) input = await this.reader.read();
    const { view, planner, loads } = input;
    const result = planCycle(loads, planner, cycle, input.cooldown);
    if (result.move && !stillHeld()) {
      log.warn({ cycle, move: result.move }, 'smoothing: planning outlived the planner lease; the move is dropped');
      return { kind: 'planned', cycle, move: null, backoffs, flatness: buildCurve(loads, planner).flatness };
    }
    if (result.move) {
      const { huntId, from, to } = result.move;
      const period = loads.find((h) => h.huntId === huntId)?.periodSeconds ?? 0;
      await writeScheduleMove(client, database, settings, { huntId, intervalSeconds: period, phaseOffset: to });
      this.deps.metrics.phaseShifts.inc({ hunt_id: huntId });
      log.info({ hunt: huntId, cycle, from, to, objective: result.objective }, 'smoothing: moved a hunt phase');
    }
    const curve = buildCurve(result.hunts, planner);
    this.publish(view, result.hunts, curve);
    this.deps.metrics.projectedFlatness.set(curve.flatness);
    return { kind: 'planned', cycle, move: result.move, backoffs, flatness: curve.flatness };
  }

  /**
   * `observe`: the same reads and gauges as `on`, and what the planner would do over the
   * next OBSERVE_HORIZON_CYCLES cycles (a gauge and one log line); nothing is written.
   */
  private async observeOnce(cycle: number): Promise<CycleOutcome> {
    const { view, planner, loads, cooldown } = await this.reader.read();
    const projected = planCycles(loads, planner, OBSERVE_HORIZON_CYCLES, cooldown, cycle);
    this.publish(view, loads, projected.before);
    this.deps.metrics.projectedFlatness.set(projected.after.flatness);
    this.logObserved(cycle, planner, projected.moves, projected.before.flatness, projected.after.flatness);
    return { kind: 'observed', cycle, wouldMove: projected.moves, flatness: projected.before.flatness, projectedFlatness: projected.after.flatness };
  }

  private logObserved(cycle: number, planner: PlannerSettings, moves: readonly PhaseMove[], flatness: number, projected: number): void {
    const shown = moves.slice(0, 5).map((m) => `${m.huntId} ${m.from}→${m.to}`);
    const more = moves.length > shown.length ? ` and ${moves.length - shown.length} more` : '';
    this.deps.log.info(
      { cycle, wouldMove: moves.length, flatness, projectedFlatness: projected, bucketSeconds: planner.bucketSeconds },
      `smoothing (observe): would move ${moves.length} hunt phase(s) in ${OBSERVE_HORIZON_CYCLES} cycle(s)${shown.length ? `: ${shown.join(', ')}${more}` : ''}; ` +
        `flatness ${flatness.toFixed(3)} → ${projected.toFixed(3)}; nothing written (DFE_HUNT_SMOOTHING=on acts)`,
    );
  }

  /**
   * Interval back-off (docs/smoothing.md): a hunt whose p95 duration exceeds its
   * interval runs into itself; its effective interval doubles, at most 8× the
   * configured one, and the hunt_state mark lets materialise keep it.
   */
  private async backOff(view: FleetView): Promise<string[]> {
    const { client, database, settings, log, metrics } = this.deps;
    const out: string[] = [];
    for (const e of view.schedule) {
      const cost = view.measured.get(e.huntId);
      const configured = this.deps.configuredInterval(e.huntId);
      if (!cost || configured === undefined || cost.durationMs <= e.intervalSeconds * 1000) continue;
      const doubled = e.intervalSeconds * 2;
      if (doubled > configured * MAX_BACKOFF_FACTOR) continue;
      await markBackoff(client, database, settings, e.huntId, 1);
      await writeScheduleMove(client, database, settings, { huntId: e.huntId, intervalSeconds: doubled, phaseOffset: e.phaseOffset });
      metrics.intervalBackoffs.inc({ hunt_id: e.huntId });
      log.warn(
        { hunt: e.huntId, p95DurationMs: cost.durationMs, from: e.intervalSeconds, to: doubled, configured },
        `hunt ${e.huntId} backed off: p95 duration ${Math.round(cost.durationMs)} ms exceeds its interval of ${e.intervalSeconds} s; now every ${doubled} s`,
      );
      out.push(e.huntId);
    }
    return out;
  }

  private publish(view: FleetView, hunts: readonly HuntLoad[], curve: LoadCurve): void {
    const m = this.deps.metrics;
    for (const h of hunts) {
      m.phaseOffset.set({ hunt_id: h.huntId }, h.offsetSeconds);
      m.intervalSeconds.set({ hunt_id: h.huntId }, h.periodSeconds);
    }
    for (const [huntId, cost] of view.costs) {
      m.costCpuSeconds.set({ hunt_id: huntId }, cost.cpuUs / 1e6);
      m.costMemBytes.set({ hunt_id: huntId }, cost.memoryBytes);
      m.costDurationSeconds.set({ hunt_id: huntId }, cost.durationMs / 1000);
    }
    m.objective.set(curve.objective);
    m.flatness.set(curve.flatness);
    for (const [gauge, stats] of [
      [m.loadCpu, curve.cpuStats],
      [m.loadMem, curve.memStats],
      [m.loadPressure, { peak: curve.peak, mean: curve.mean, flatness: curve.flatness }],
    ] as const) {
      gauge.set({ stat: 'peak' }, stats.peak);
      gauge.set({ stat: 'mean' }, stats.mean);
      gauge.set({ stat: 'flatness' }, stats.flatness);
    }
  }
}

