import type { Clock } from '../clock.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { claimFire, type ClaimTiming } from './claim.js';
import type { Coordinator } from './coordination.js';
import { executeFire, runSettingKeys } from './execute.js';
import type { ClaimMetricOutcome, RunnerMetrics, RunOutcome } from './metrics.js';
import type { PlannedRun } from './plan.js';
import type { SessionPool } from './sessions.js';
import { RUN_STATUS } from './tables.js';
import { runWindow, type RunWindow } from './window.js';

/**
 * One planned fire, from claim to release (SPEC §7.6 steps 3–6). A failure is
 * logged, counted and released; the fire stays owed. An aborted runner (a
 * simulated crash) writes nothing more: its lease expires on its own.
 */
export interface RunnerEvents {
  tick?(record: TickRecord): void;
  /** `plannedAt`: the ClickHouse clock (epoch seconds) of the tick that planned the claim. */
  claim?(event: { runnerId: string; huntId: string; fire: number; plannedAt: number; outcome: ClaimMetricOutcome }): void;
  statement?(event: { runnerId: string; huntId: string; fire: number; index: number }): void;
  run?(event: { runnerId: string; huntId: string; fire: number; outcome: RunOutcome; window: RunWindow }): void;
}

export interface TickRecord {
  readonly runnerId: string;
  readonly serverNow: number;
  /** dueCountSql: what the shim's backlog query answers at this tick's clock. */
  readonly backlog: number;
  /** The gate: how many due rows this tick's due query returned. */
  readonly gate: number;
  readonly started: number;
  readonly inFlight: number;
}

export interface FireContext {
  readonly runnerId: string;
  readonly coord: Coordinator;
  readonly sessions: SessionPool;
  readonly timing: ClaimTiming;
  readonly clock: Clock;
  readonly metrics: RunnerMetrics;
  readonly log: Logger;
  readonly events: RunnerEvents;
  readonly signal: AbortSignal;
}

/** Renews the lease every lease/3 until stopped, so a long run is never taken over. */
function startRenewal(ctx: FireContext, huntId: string, fire: number): () => void {
  const everyMs = (ctx.timing.leaseSeconds * 1000) / 3;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const renew = async () => {
    if (stopped || ctx.signal.aborted) return;
    try {
      await ctx.coord.putLease(huntId, ctx.runnerId, fire, ctx.timing.leaseSeconds);
    } catch (err) {
      if (!ctx.signal.aborted) ctx.log.warn({ hunt: huntId, fire, err: describeError(err) }, 'lease renewal failed');
    }
    if (!stopped) timer = setTimeout(renew, everyMs);
  };
  timer = setTimeout(renew, everyMs);
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

function claimed(ctx: FireContext, planned: PlannedRun, outcome: ClaimMetricOutcome): void {
  ctx.metrics.claims.inc({ outcome });
  const plannedAt = planned.fire + planned.latenessSeconds;
  ctx.events.claim?.({ runnerId: ctx.runnerId, huntId: planned.spec.huntId, fire: planned.fire, plannedAt, outcome });
}

export async function runPlannedFire(ctx: FireContext, planned: PlannedRun): Promise<void> {
  const { spec, fire } = planned;
  const huntId = spec.huntId;
  const log = ctx.log.child({ hunt: huntId, fire });
  try {
    const claim = await claimFire(ctx.coord, huntId, ctx.runnerId, fire, ctx.timing);
    if (claim.kind !== 'won') {
      claimed(ctx, planned, claim.kind);
      log.debug({ outcome: claim.kind, holder: claim.kind === 'lost' ? claim.holder?.owner : undefined }, 'claim did not stand');
      return;
    }
    const watermark = await ctx.coord.watermark(huntId);
    if (watermark !== null && watermark >= fire) {
      claimed(ctx, planned, 'already_run');
      await ctx.coord.putLease(huntId, ctx.runnerId, fire, 'release');
      return;
    }
    claimed(ctx, planned, 'won');
    await runClaimedFire(ctx, planned, runWindow(fire, watermark, spec.intervalSeconds), log);
  } catch (err) {
    if (ctx.signal.aborted) return;
    log.warn({ err: describeError(err) }, 'claim failed; the fire stays owed');
  }
}

async function runClaimedFire(ctx: FireContext, planned: PlannedRun, window: RunWindow, log: Logger): Promise<void> {
  const { spec, fire } = planned;
  const huntId = spec.huntId;
  ctx.metrics.fireLateness.observe(Math.max(0, planned.latenessSeconds));
  const stopRenewal = startRenewal(ctx, huntId, fire);
  const startedMs = ctx.clock.nowMs();
  let outcome: RunOutcome = 'succeeded';
  let rowsWritten = 0;
  const session = await ctx.sessions.acquire();
  try {
    ({ rowsWritten } = await executeFire(session.client, spec, fire, window, {
      signal: ctx.signal,
      onStatement: (index) => ctx.events.statement?.({ runnerId: ctx.runnerId, huntId, fire, index }),
    }));
  } catch (err) {
    if (ctx.signal.aborted) {
      stopRenewal();
      return;
    }
    outcome = 'failed';
    log.error({ err: describeError(err), file: spec.file }, 'hunt run failed; the fire stays owed');
  } finally {
    await ctx.sessions.release(session, runSettingKeys(spec));
  }
  try {
    // Order matters: the watermark before the release, so a peer that claims
    // right after the release finds the fire already run.
    if (outcome === 'succeeded') await ctx.coord.setWatermark(huntId, fire);
    stopRenewal();
    await ctx.coord.putLease(huntId, ctx.runnerId, fire, 'release');
    await ctx.coord.runRow(huntId, fire, outcome === 'succeeded' ? RUN_STATUS.succeeded : RUN_STATUS.failed, rowsWritten);
  } catch (err) {
    if (ctx.signal.aborted) return;
    log.warn({ err: describeError(err) }, 'could not record the end of a run; its lease expires on its own');
  } finally {
    stopRenewal();
  }
  ctx.metrics.runs.inc({ hunt_id: huntId, outcome });
  ctx.metrics.runDuration.observe((ctx.clock.nowMs() - startedMs) / 1000);
  ctx.events.run?.({ runnerId: ctx.runnerId, huntId, fire, outcome, window });
}
