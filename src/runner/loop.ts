import type { ClickHouseClient } from '@clickhouse/client';
import { setMaxListeners } from 'node:events';
import type { Clock } from '../clock.js';
import type { ClickHouseConfig, RunnerConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { Coordinator } from '../coordination/coordinator.js';
import { ServerTime, type CoordinationTime } from '../coordination/server-clock.js';
import { huntsDirSignature, loadHuntsDir, logHuntSet } from '../schedule/hunt-files.js';
import { materialise, materialiseSummary, warnMaterialise } from '../coordination/materialise.js';
import type { RunnerMetrics } from './metrics.js';
import { knowHunts, zeroAutoDisabled } from './hunt-series.js';
import { overrunFire, planTick, type PlannedRun } from '../schedule/plan.js';
import { claimAndRun, type FinishedRun, type RunnerEvents, type TickRecord } from './fire.js';
import { coordinationSettings, resolveTopology } from '../coordination/topology.js';
import type { ResolvedTopology } from '../coordination/tables.js';
import type { SessionPool } from '../clickhouse/sessions.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import { createRunnerSmoothing, type CycleOutcome, type RunnerSmoothing } from '../smoothing/control/for-runner.js';
import { resolveClaimMode } from '../coordination/claims/mode.js';
import { claimProtocol } from '../coordination/claims/index.js';
import type { ClaimMode, ClaimProtocol } from '../coordination/claims/protocol.js';
import { DfeError } from '../errors.js';

/** Every ClickHouse call of a runner listens on one signal; many run at once. */
function abortController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

const DISABLED_GAUGE_REFRESH_MS = 60_000;

export type ClickHouseState = 'unknown' | 'up' | 'down';

export interface RunnerDeps {
  readonly runnerId: string;
  readonly client: ClickHouseClient;
  readonly clickhouse: ClickHouseConfig;
  readonly settings: RunnerConfig;
  readonly sessions: SessionPool;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
  readonly time: 'server' | 'clock';
  readonly metrics: RunnerMetrics;
  readonly log: Logger;
  readonly events: RunnerEvents;
  /** Resolved by the caller once per process; when absent, the first tick that reaches ClickHouse resolves it. */
  readonly topology?: ResolvedTopology;
}

interface InFlight {
  readonly fire: number;
  /** hunt_schedule's interval and offset when the run was planned (for overruns). */
  readonly schedule: { readonly intervalSeconds: number; readonly phaseOffset: number };
  readonly done: Promise<void>;
  /** The claim was won: this runner holds the lease and runs the fire. */
  running: boolean;
  overrunCountedThrough: number;
}

/**
 * One runner's state and its tick (docs/runner.md#a-tick). The loop, HTTP and process
 * wiring live in start.ts; this file decides what a tick does. ClickHouse being
 * down skips the tick (logged once down, once up); nothing here throws out of
 * `tick()`, so the process stays alive.
 */
export class Runner {
  private hunts = new Map<string, HuntSpec>();
  private signature = '';
  private needsMaterialise = true;
  private coord: Coordinator | undefined;
  private smoothing: RunnerSmoothing | undefined;
  private claims: ClaimProtocol | undefined;
  private lastPlan: Promise<CycleOutcome | undefined> = Promise.resolve(undefined);
  private gaugeRefreshedMs = Number.NEGATIVE_INFINITY;
  private readonly inFlight = new Map<string, InFlight>();
  private readonly abort = abortController();
  private chState: ClickHouseState = 'unknown';
  private halted = false;

  constructor(private readonly deps: RunnerDeps) {}

  get clickhouseState(): ClickHouseState {
    return this.chState;
  }

  get huntCount(): number {
    return this.hunts.size;
  }

  /** The claim mode in use, once resolved (docs/claim-protocol.md#choosing-the-mode). */
  get claimMode(): ClaimMode | undefined {
    return this.claims?.mode;
  }

  /** Loads the hunts directory; throws only if the directory itself is unreadable. */
  loadHunts(): void {
    const set = loadHuntsDir(this.deps.settings.huntsDir, this.deps.settings.spreadFraction);
    logHuntSet(this.deps.log, set);
    if (set.invalid.length > 0) this.deps.metrics.specErrors.inc(set.invalid.length);
    this.hunts = new Map(set.hunts.map((h) => [h.huntId, h]));
    // Each hunt's series starts at 0 (and a gone hunt's go), so an alert sees its first skip as an increase.
    knowHunts(this.deps.metrics, this.hunts.keys());
    this.signature = set.signature;
    this.needsMaterialise = true;
  }

  private reloadIfChanged(): void {
    let signature: string;
    try {
      signature = huntsDirSignature(this.deps.settings.huntsDir);
    } catch (err) {
      this.deps.log.warn({ err }, 'hunts directory unreadable; keeping the hunts loaded before');
      return;
    }
    if (signature === this.signature) return;
    this.deps.log.info({ dir: this.deps.settings.huntsDir }, 'hunts directory changed; reloading');
    this.loadHunts();
  }

  private async coordinator(): Promise<Coordinator> {
    if (this.coord) return this.coord;
    const { client, clickhouse } = this.deps;
    const topology = this.deps.topology ?? (await resolveTopology(client, clickhouse));
    const time: CoordinationTime = this.deps.time === 'clock' ? { kind: 'clock', clock: this.deps.clock } : { kind: 'server' };
    const serverTime = new ServerTime(time, this.deps.clock);
    const settings = coordinationSettings(topology);
    const mode = await resolveClaimMode(client, clickhouse.dataDatabase, topology, this.deps.settings.claims, settings);
    const coord = new Coordinator(client, clickhouse.dataDatabase, settings, serverTime, this.abort.signal);
    this.claims = claimProtocol(mode.mode, coord, this.deps.runnerId, this.claimTiming());
    this.deps.metrics.claimMode.set({ mode: mode.mode }, 1);
    this.deps.log.info({ claims: mode.mode, source: mode.source }, `claims: ${mode.mode} (${mode.source})`);
    this.coord = coord;
    this.smoothing = createRunnerSmoothing({
      client,
      database: clickhouse.dataDatabase,
      settings: this.coord.settings,
      smoothing: this.deps.settings.smoothing,
      autoDisable: this.deps.settings.autoDisable,
      metrics: this.deps.metrics.smoothing,
      log: this.deps.log,
      runnerId: this.deps.runnerId,
      timing: this.claimTiming(),
      hunt: (huntId) => this.hunts.get(huntId),
    });
    return this.coord;
  }

  private async materialiseIfNeeded(coord: Coordinator): Promise<void> {
    if (!this.needsMaterialise) return;
    const hunts = [...this.hunts.values()];
    const plan = await materialise(this.deps.client, coord.database, hunts, coord.settings);
    this.needsMaterialise = false;
    for (const huntId of plan.promoted) this.deps.metrics.smoothing.promotions.inc({ hunt_id: huntId });
    this.deps.log.info({ added: plan.added, changed: plan.changed, tombstoned: plan.tombstoned, keeper_keys_deleted: plan.keeperKeysDeleted }, materialiseSummary(plan, coord.database));
    warnMaterialise(this.deps.log, plan);
  }

  /** On start: materialise at once (docs/tables.md#materialise); if ClickHouse is down, the first tick that reaches it does. */
  async prepare(): Promise<void> {
    try {
      await this.materialiseIfNeeded(await this.coordinator());
    } catch (err) {
      // A claim mode that cannot work here (DFE_COORDINATION_CLAIMS=keeper without KeeperMap) stops the start.
      if (err instanceof DfeError && err.code === 'CONFIG_INVALID') throw err;
      this.markClickHouse('down', err);
    }
  }

  private markClickHouse(state: 'up' | 'down', err?: unknown): void {
    if (state === 'down' && this.chState !== 'down') {
      this.deps.log.error({ err }, 'ClickHouse unreachable; ticks are skipped until it answers');
    } else if (state === 'up' && this.chState === 'down') {
      this.deps.log.info('ClickHouse answers again; ticking');
    }
    this.chState = state;
  }

  /** One tick. Returns what it saw, or undefined when ClickHouse did not answer or the runner is stopped. */
  async tick(): Promise<TickRecord | undefined> {
    if (this.abort.signal.aborted || this.halted) return undefined;
    const startedMs = this.deps.clock.nowMs();
    this.reloadIfChanged();
    let record: TickRecord | undefined;
    try {
      const coord = await this.coordinator();
      await this.materialiseIfNeeded(coord);
      const snapshot = await coord.tick();
      // A lost heartbeat row costs nothing but a stale "seen"; it must not skip the tick.
      await coord.heartbeat(this.deps.runnerId, this.deps.settings.pollSeconds).then(
        () => this.deps.metrics.lastHeartbeat.set(this.deps.clock.nowMs() / 1000),
        (err: unknown) => {
          this.deps.log.warn({ err }, 'heartbeat write failed; the tick goes on');
        },
      );
      this.markClickHouse('up');
      this.deps.metrics.backlog.set(snapshot.backlog);
      this.countOverruns(coord, snapshot.serverNow);
      const plan = planTick(snapshot, this.hunts, new Set(this.inFlight.keys()), this.deps.settings.cap, this.deps.runnerId);
      this.start(coord, plan.start);
      this.refreshDisabledGauge();
      // In the background, so planning never delays a tick's runs.
      if (this.smoothing) this.lastPlan = this.smoothing.maybePlan(coord, snapshot.serverNow);
      record = {
        runnerId: this.deps.runnerId,
        serverNow: snapshot.serverNow,
        backlog: snapshot.backlog,
        gate: snapshot.due.length,
        started: plan.start.length,
        inFlight: this.inFlight.size,
      };
      this.deps.events.tick?.(record);
    } catch (err) {
      if (this.abort.signal.aborted) return undefined;
      this.markClickHouse('down', err);
    }
    this.deps.metrics.tickDuration.observe((this.deps.clock.nowMs() - startedMs) / 1000);
    return record;
  }

  /** dfe_hunt_autodisabled follows hunt_state (any runner may disable), at most once a minute. */
  private refreshDisabledGauge(): void {
    const nowMs = this.deps.clock.nowMs();
    if (!this.smoothing || nowMs - this.gaugeRefreshedMs < DISABLED_GAUGE_REFRESH_MS) return;
    this.gaugeRefreshedMs = nowMs;
    this.smoothing.refreshDisabled().then((disabled) => zeroAutoDisabled(this.deps.metrics, disabled), (err: unknown) => {
      if (!this.abort.signal.aborted) this.deps.log.warn({ err }, 'could not read auto-disabled hunts');
    });
  }

  /** The smoothing cycle this runner started last (tests wait for it). */
  lastPlanningCycle(): Promise<CycleOutcome | undefined> {
    return this.lastPlan;
  }

  private claimTiming() {
    const { sessions, clock, settings } = this.deps;
    return {
      leaseSeconds: settings.leaseSeconds,
      settleMs: settings.settleMs,
      clock,
      sleep: this.deps.sleep,
      claimStart: <T>(fn: () => Promise<T>) => sessions.claimStart(fn),
    };
  }

  private start(coord: Coordinator, batch: readonly PlannedRun[]): void {
    if (batch.length === 0) return;
    const { runnerId, sessions, clock, metrics, log, events } = this.deps;
    const timing = this.claimTiming();
    const onRunStart = (huntId: string) => {
      const entry = this.inFlight.get(huntId);
      if (entry) entry.running = true;
    };
    const smoothing = this.smoothing;
    const onRunFinished = async (run: FinishedRun) => smoothing?.afterRun(run.huntId, run.cost.errorCode);
    const maxCatchupSeconds = this.deps.settings.maxCatchupSeconds;
    const claims = this.claims ?? claimProtocol('tables', coord, runnerId, timing);
    const ctx = { runnerId, coord, claims, sessions, timing, clock, metrics, log, events, signal: this.abort.signal, maxCatchupSeconds, onRunStart, onRunFinished };
    const runs = claimAndRun(ctx, batch);
    for (const planned of batch) {
      const huntId = planned.spec.huntId;
      // A freed slot is filled at the next tick, not at once: one claim batch per
      // tick keeps coordination cheap (refilling slot by slot was measured slower).
      const done = (runs.get(huntId) ?? Promise.resolve()).finally(() => this.inFlight.delete(huntId));
      this.inFlight.set(huntId, { fire: planned.fire, schedule: planned, done, running: false, overrunCountedThrough: planned.fire });
    }
  }

  /** No new runs from now on (stop): in-flight ones finish. */
  halt(): void {
    this.halted = true;
  }

  /** docs/runner.md#a-tick: an overrun is a fire that comes due while we still hold the lease of an earlier one. */
  private countOverruns(coord: Coordinator, serverNow: number): void {
    for (const [huntId, run] of this.inFlight) {
      if (!run.running) continue;
      const newer = overrunFire(run.schedule, run.fire, serverNow);
      if (newer === undefined || newer <= run.overrunCountedThrough) continue;
      run.overrunCountedThrough = newer;
      this.deps.metrics.overruns.inc();
      this.deps.log.warn({ hunt: huntId, fire: run.fire, due: newer }, 'hunt overrun: the next fire came due while this one still runs');
      coord.addOverrun(huntId).catch((err: unknown) => this.deps.log.warn({ err }, 'could not record an overrun'));
    }
  }

  /** The runs in flight (hunt and planned fire), for what a stop abandons. */
  inFlightRuns(): Array<{ huntId: string; fire: number }> {
    return [...this.inFlight].map(([huntId, run]) => ({ huntId, fire: run.fire }));
  }

  /** Resolves when no run is in flight. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()].map((r) => r.done));
  }

  /** Like a crash: in-flight runs stop at their next step and write nothing more. */
  crash(): void {
    this.abort.abort(new Error('runner aborted'));
  }
}
