import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { ClaimTiming } from '../coordination/claims/table-claims.js';
import type { ClaimOutcome, ClaimProtocol, HeldClaim } from '../coordination/claims/protocol.js';
import type { Coordinator, RunRowCost } from '../coordination/coordinator.js';
import { executeFire, runSettingKeys } from './statements.js';
import type { ClaimMetricOutcome, RunnerMetrics, RunOutcome } from './metrics.js';
import type { PlannedRun } from '../schedule/plan.js';
import type { SessionPool, StatementSession } from '../clickhouse/sessions.js';
import { RUN_STATUS } from '../coordination/tables.js';
import { runWindow, type RunWindow } from '../schedule/window.js';
import { boundedRunWindow, effectiveMaxCatchup } from '../schedule/catchup.js';
import { annotate, failCurrentSpan, startSpan, withSpan } from '../telemetry/trace.js';

/**
 * Planned fires, from claim to release (docs/runner.md#a-tick, steps 3–6). A failure is
 * logged, counted and released; the fire stays owed. An aborted runner (a
 * simulated crash) writes nothing more: its lease expires on its own.
 */
export interface RunnerEvents {
  tick?(record: TickRecord): void;
  /**
   * `fire`: the fire claimed — for a won claim the one it holds, which a retake makes an earlier
   * one than planned — else the one planned. `plannedAt`: the ClickHouse clock (epoch seconds) of
   * the tick that planned the claim.
   */
  claim?(event: { runnerId: string; huntId: string; fire: number; plannedAt: number; outcome: ClaimMetricOutcome }): void;
  statement?(event: { runnerId: string; huntId: string; fire: number; index: number }): void;
  /** `skipped`: the range the catch-up bound left out of `window`, if any. */
  run?(event: RunEvent): void;
}

export interface RunEvent {
  readonly runnerId: string;
  readonly huntId: string;
  readonly fire: number;
  readonly outcome: RunOutcome;
  readonly window: RunWindow;
  readonly skipped?: RunWindow;
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
  /** The claim mode in use (docs/claim-protocol.md): claims, renewals, releases. */
  readonly claims: ClaimProtocol;
  readonly sessions: SessionPool;
  readonly timing: ClaimTiming;
  readonly clock: Clock;
  readonly metrics: RunnerMetrics;
  readonly log: Logger;
  readonly events: RunnerEvents;
  readonly signal: AbortSignal;
  /** DFE_HUNT_MAX_CATCHUP_SECONDS; a hunt file's `max_catchup` replaces it (docs/hunts.md#catch-up). */
  readonly maxCatchupSeconds: number;
  /** Called when a claim is won and its run starts (the runner tracks overruns from here). */
  readonly onRunStart?: (huntId: string) => void;
  /** Called after a finished run's rows are written (escalation: auto-disable, docs/smoothing.md). Must not throw. */
  readonly onRunFinished?: (event: FinishedRun) => Promise<void>;
}

export interface FinishedRun {
  readonly huntId: string;
  readonly fire: number;
  readonly outcome: RunOutcome;
  readonly cost: RunRowCost;
}

/** ClickHouse's numeric error code of a failed statement (ClickHouseError.code is a string), else 0. */
export function clickHouseErrorCode(err: unknown): number {
  const code = Number((err as { code?: unknown } | null)?.code);
  return Number.isSafeInteger(code) && code > 0 ? code : 0;
}

/**
 * Renews the lease every lease/3 until stopped, so a long run is never taken
 * over. Stopping waits for a renewal already sent: it goes over the runner's
 * own connection, the release over the run's, so a renewal still queued there
 * could otherwise land over the release and hold the hunt for a whole lease.
 */
interface Renewal {
  /** Stops renewing; waits for a renewal already sent. */
  stop(): Promise<void>;
  /** A renewal found the lease taken over: the run must not commit (docs/claim-protocol.md#the-invariant). */
  readonly lost: boolean;
}

function startRenewal(ctx: FireContext, held: HeldClaim): Renewal {
  const { huntId, fire } = held;
  const everyMs = (ctx.timing.leaseSeconds * 1000) / 3;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let lost = false;
  let sent: Promise<void> = Promise.resolve();
  const renew = async () => {
    if (stopped || ctx.signal.aborted) return;
    try {
      if ((await ctx.claims.renew(held)) === 'lost') {
        // Never silent. The statement already sent goes on (a duplicate of the taker's run of
        // the same window, which the dedup token removes), but this run will not commit.
        lost = true;
        leaseLost(ctx, held);
        return;
      }
    } catch (err) {
      if (!ctx.signal.aborted) ctx.log.warn({ hunt: huntId, fire, err }, 'lease renewal failed');
    }
    if (!stopped) timer = setTimeout(() => (sent = renew()), everyMs);
  };
  timer = setTimeout(() => (sent = renew()), everyMs);
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await sent;
    },
    get lost() {
      return lost;
    },
  };
}

function leaseLost(ctx: FireContext, held: HeldClaim): void {
  ctx.metrics.leaseLost.inc({ hunt_id: held.huntId });
  ctx.log.warn(
    { hunt: held.huntId, fire: held.fire, mode: ctx.claims.mode },
    `lease of hunt ${held.huntId} taken over while its run went on: this run stops before its watermark; fire ${held.fire} is the taker's now`,
  );
}

function claimed(ctx: FireContext, planned: PlannedRun, outcome: ClaimMetricOutcome, fire = planned.fire): void {
  ctx.metrics.claims.inc({ outcome });
  const plannedAt = planned.fire + planned.latenessSeconds;
  ctx.events.claim?.({ runnerId: ctx.runnerId, huntId: planned.spec.huntId, fire, plannedAt, outcome });
}

/**
 * Claims one tick's batch of planned fires and runs each won fire. Returns
 * one promise per hunt, settled when that hunt's fire is done (lost, skipped,
 * succeeded or failed); none rejects.
 */
export function claimAndRun(ctx: FireContext, batch: readonly PlannedRun[]): Map<string, Promise<void>> {
  const requests = batch.map((p) => ({ huntId: p.spec.huntId, fire: p.fire, intervalSeconds: p.intervalSeconds }));
  const claims = ctx.claims.claim(requests).catch((err: unknown) => {
    if (!ctx.signal.aborted) ctx.log.warn({ hunts: requests.length, err }, 'claim failed; the fires stay owed');
    return new Map<string, ClaimOutcome>();
  });
  return new Map(batch.map((p) => [p.spec.huntId, claims.then((outcomes) => afterClaim(ctx, p, outcomes.get(p.spec.huntId)))]));
}

/**
 * A fire after its claim, inside a root span `hunt run` (docs/operations.md#traces):
 * hunt id, fire, claim outcome, and for a run its outcome and rows written.
 */
async function afterClaim(ctx: FireContext, planned: PlannedRun, claim: ClaimOutcome | undefined): Promise<void> {
  if (!claim || ctx.signal.aborted) return;
  const span = startSpan('hunt run', 'internal', {
    'dfe.hunt.id': planned.spec.huntId,
    'dfe.hunt.fire': planned.fire,
    'dfe.claim.outcome': claim.kind,
  });
  try {
    await withSpan(span, () => claimedFire(ctx, planned, claim));
  } finally {
    span?.end();
  }
}

async function claimedFire(ctx: FireContext, planned: PlannedRun, claim: ClaimOutcome): Promise<void> {
  const { spec } = planned;
  if (claim.kind === 'failed') {
    if (!ctx.signal.aborted) ctx.log.warn({ hunt: spec.huntId, fire: planned.fire, err: claim.error }, 'claim failed; the fire stays owed');
    return;
  }
  // The fire claimed: a retake of an unfinished window may be an earlier fire than planned.
  const fire = claim.kind === 'won' ? claim.held.fire : planned.fire;
  const log = ctx.log.child({ hunt: spec.huntId, fire });
  if (claim.kind !== 'won') {
    claimed(ctx, planned, claim.kind);
    log.debug({ outcome: claim.kind, holder: claim.kind === 'lost' ? claim.holder?.owner : undefined }, 'claim did not stand');
    if (claim.kind === 'late' && claim.releaseError !== undefined && !ctx.signal.aborted) {
      log.warn({ err: claim.releaseError }, 'late claim not released: its row holds the hunt until its lease ends');
    }
    return;
  }
  try {
    // The window the claim owns: recorded at claim time (Keeper mode), else [watermark, fire).
    const claimedWindow = claim.window ?? runWindow(fire, claim.watermark, planned.intervalSeconds);
    // Already run: the watermark is past the fire, or past the window's start (a stale claim from an old watermark).
    if (claim.watermark !== null && (claim.watermark >= fire || claim.watermark > claimedWindow.startSeconds)) {
      annotate({ 'dfe.claim.outcome': 'already_run' });
      claimed(ctx, planned, 'already_run', fire);
      await ctx.claims.release(claim.held, { succeeded: true });
      return;
    }
    claimed(ctx, planned, 'won', fire);
    log.debug({ window: claimedWindow, watermark: claim.watermark, planned: planned.fire }, 'claim won; the run starts');
    ctx.onRunStart?.(spec.huntId);
    const bound = effectiveMaxCatchup(planned.intervalSeconds, ctx.maxCatchupSeconds, spec.maxCatchupSeconds);
    const { window, skipped } = boundedRunWindow(fire, claimedWindow.startSeconds, planned.intervalSeconds, bound);
    if (skipped) catchupSkipped(ctx, log, spec.huntId, skipped, window, bound);
    await runClaimedFire(ctx, { ...planned, fire }, claim, { window, claimed: claimedWindow, dueFire: planned.fire }, log, skipped);
  } catch (err) {
    if (!ctx.signal.aborted) log.warn({ err }, 'run could not start or finish; its lease expires on its own');
  }
}

/** docs/hunts.md#catch-up: never silent — a warning naming hunt and range, and a counter (the run row records it too). */
function catchupSkipped(ctx: FireContext, log: Logger, huntId: string, skipped: RunWindow, window: RunWindow, bound: number): void {
  const iso = (s: number) => new Date(s * 1000).toISOString();
  ctx.metrics.catchupSkipped.inc({ hunt_id: huntId });
  log.warn(
    { skipped_from: skipped.startSeconds, skipped_to: skipped.endSeconds, max_catchup_seconds: bound },
    `catch-up bounded: hunt ${huntId} skips [${iso(skipped.startSeconds)}, ${iso(skipped.endSeconds)}) ` +
      `(${skipped.endSeconds - skipped.startSeconds} s older than max_catchup ${bound} s) and runs [${iso(window.startSeconds)}, ${iso(window.endSeconds)})`,
  );
}

/**
 * A won fire's statements and end-of-run writes share one session from the
 * pool (on the embedded backend a session runs one query at a time, so fires
 * must not queue behind each other on one connection). Renewals go through the
 * runner's own connection, which never runs a long statement.
 */
async function runClaimedFire(
  ctx: FireContext,
  planned: PlannedRun,
  claim: Extract<ClaimOutcome, { kind: 'won' }>,
  windows: { readonly window: RunWindow; readonly claimed: RunWindow; readonly dueFire: number },
  log: Logger,
  skipped?: RunWindow,
): Promise<void> {
  const { spec, fire } = planned;
  const { window } = windows;
  const huntId = spec.huntId;
  ctx.metrics.fireLateness.observe(Math.max(0, planned.latenessSeconds));
  const renewal = startRenewal(ctx, claim.held);
  const startedMs = ctx.clock.nowMs();
  let session: StatementSession | undefined;
  let finished: FinishedRun | undefined;
  let outcome: RunOutcome = 'succeeded';
  let rowsWritten = 0;
  let elapsedMs: number | undefined;
  let memoryBytes = 0;
  let errorCode = 0;
  try {
    // Inside the try: a session that cannot be opened must stop the renewal too.
    const own = (session = await ctx.sessions.acquire());
    const coord = ctx.coord.withClient(own.client);
    const statementsStartedMs = ctx.clock.nowMs();
    try {
      ({ rowsWritten, elapsedMs, memoryBytes } = await ctx.sessions.runStatements(() =>
        executeFire(own.client, spec, fire, window, {
          dedupWindow: windows.claimed,
          signal: ctx.signal,
          onStatement: (index) => ctx.events.statement?.({ runnerId: ctx.runnerId, huntId, fire, index }),
        }),
      ));
    } catch (err) {
      if (ctx.signal.aborted) return;
      outcome = 'failed';
      errorCode = clickHouseErrorCode(err);
      annotate({ 'dfe.hunt.error_code': errorCode });
      failCurrentSpan('a hunt statement failed');
      log.error({ err, file: spec.file }, 'hunt run failed; the fire stays owed');
    }
    const statementsMs = ctx.clock.nowMs() - statementsStartedMs;
    // The hunt's settings must not ride along on the coordination writes below.
    await ctx.sessions.reset(own, runSettingKeys(spec));
    // The commit, fenced twice: a run whose lease was taken over stops here (the taker runs
    // the same window), and the watermark write itself never moves the watermark back.
    // Order matters: the watermark before the release, so a peer that claims right after
    // the release finds the fire already run.
    const claims = ctx.claims.on(own.client);
    const stale = outcome === 'succeeded' && (renewal.lost || !(await claims.holds(claim.held)));
    if (stale) {
      if (!renewal.lost) leaseLost(ctx, claim.held);
      outcome = 'failed';
    }
    log.debug({ outcome, stale, window }, 'run ended; committing');
    if (outcome === 'succeeded') await coord.setWatermark(huntId, fire);
    await renewal.stop();
    // A stale run releases nothing: the lease is the taker's.
    if (!stale) await claims.release(claim.held, { succeeded: outcome === 'succeeded' });
    // Duration: the summaries' elapsed time where they carry it, else the wall time of the statements.
    const durationMs = Math.round(elapsedMs ?? statementsMs);
    const cost: RunRowCost = { durationMs, cpuUs: 0, memoryBytes, errorCode };
    // A failed run's row is filed under the fire its tick planned (the latest due), not the
    // retaken window's end: hunt_run collapses rows of one (hunt, fire), and a window that fails
    // again and again must leave one row per try for the crash-loop count (docs/tables.md).
    const rowFire = outcome === 'succeeded' ? fire : Math.max(fire, windows.dueFire);
    await coord.runRow(huntId, rowFire, outcome === 'succeeded' ? RUN_STATUS.succeeded : RUN_STATUS.failed, rowsWritten, cost, skipped);
    finished = { huntId, fire, outcome, cost };
  } finally {
    await renewal.stop();
    if (session && !ctx.signal.aborted) await ctx.sessions.release(session, runSettingKeys(spec));
  }
  annotate({ 'dfe.hunt.outcome': outcome, 'dfe.hunt.rows_written': rowsWritten });
  if (finished && ctx.onRunFinished && !ctx.signal.aborted) await ctx.onRunFinished(finished);
  ctx.metrics.runs.inc({ hunt_id: huntId, outcome });
  ctx.metrics.runDuration.observe((ctx.clock.nowMs() - startedMs) / 1000);
  ctx.events.run?.({ runnerId: ctx.runnerId, huntId, fire, outcome, window, ...(skipped ? { skipped } : {}) });
}
