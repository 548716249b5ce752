import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SmoothingMetrics } from '../smoothing/metrics.js';

/**
 * The runner's metrics (docs/runner.md#probes-and-metrics). Label names are static; the only label
 * values that come from configuration are hunt ids (file stems), which the
 * operator controls and which are bounded by the hunts directory.
 */
export type ClaimMetricOutcome = 'won' | 'lost' | 'late' | 'already_run';
export type RunOutcome = 'succeeded' | 'failed';

export interface RunnerMetrics {
  readonly registry: Registry;
  readonly runs: Counter<'hunt_id' | 'outcome'>;
  readonly runDuration: Histogram;
  readonly claims: Counter<'outcome'>;
  readonly overruns: Counter;
  readonly backlog: Gauge;
  readonly lastHeartbeat: Gauge;
  readonly tickDuration: Histogram;
  readonly fireLateness: Histogram;
  readonly specErrors: Counter;
  readonly catchupSkipped: Counter<'hunt_id'>;
  readonly leaseLost: Counter<'hunt_id'>;
  /** 1 for the claim mode in use (docs/claim-protocol.md#choosing-the-mode). */
  readonly claimMode: Gauge<'mode'>;
  readonly smoothing: SmoothingMetrics;
  /** Hunts whose series exist at 0 (hunt-series.ts), kept with the registry they live in. */
  readonly knownHunts: Set<string>;
}

/** The load curve's statistics: each exists from the first scrape, at 0 until the first planning cycle sets it. */
const LOAD_STATS = ['peak', 'mean', 'flatness'] as const;

function statGauge(options: { name: string; help: string; labelNames: readonly ['stat']; registers: Registry[] }): Gauge<'stat'> {
  const gauge = new Gauge(options);
  for (const stat of LOAD_STATS) gauge.set({ stat }, 0);
  return gauge;
}

/** Load smoothing and escalation metrics (docs/smoothing.md): their interface lives with the smoothing code. */
function smoothingMetrics(registers: Registry[]): SmoothingMetrics {
  const hunt = ['hunt_id'] as const;
  const stat = ['stat'] as const;
  return {
    phaseShifts: new Counter({ name: 'dfe_hunt_phase_shift_total', help: 'Phase moves the smoothing controller committed.', labelNames: hunt, registers }),
    phaseOffset: new Gauge({ name: 'dfe_hunt_phase_offset', help: 'hunt_schedule.phase_offset (seconds into the period).', labelNames: hunt, registers }),
    intervalBackoffs: new Counter({
      name: 'dfe_hunt_interval_backoff_total',
      help: 'Interval back-offs: p95 duration over the interval doubled the effective interval.',
      labelNames: hunt,
      registers,
    }),
    intervalSeconds: new Gauge({ name: 'dfe_hunt_interval_seconds', help: 'Effective interval in hunt_schedule (after back-off).', labelNames: hunt, registers }),
    promotions: new Counter({
      name: 'dfe_hunt_schedule_promotions_total',
      help: 'Learned offsets that came back pinned in the hunt file (exported and committed) at materialise.',
      labelNames: hunt,
      registers,
    }),
    autoDisabled: new Gauge({
      name: 'dfe_hunt_autodisabled',
      help: '1 while a hunt is auto-disabled, by reason; lifted only by `dfe-hunt-runner enable <hunt>`.',
      labelNames: ['hunt_id', 'reason'] as const,
      registers,
    }),
    costCpuSeconds: new Gauge({ name: 'dfe_hunt_cost_cpu_seconds', help: 'p95 CPU time of a run (seconds) over the cost window.', labelNames: hunt, registers }),
    costMemBytes: new Gauge({ name: 'dfe_hunt_cost_mem_bytes', help: 'p95 peak memory of a run (bytes) over the cost window.', labelNames: hunt, registers }),
    costDurationSeconds: new Gauge({ name: 'dfe_hunt_cost_duration_seconds', help: 'p95 duration of a run (seconds) over the cost window.', labelNames: hunt, registers }),
    loadCpu: statGauge({ name: 'dfe_hunt_load_cpu', help: 'CPU curve C(b)/C_cap over the hyperperiod: peak, mean, flatness.', labelNames: stat, registers }),
    loadMem: statGauge({ name: 'dfe_hunt_load_mem', help: 'Memory curve M(b)/M_cap over the hyperperiod: peak, mean, flatness.', labelNames: stat, registers }),
    loadPressure: statGauge({ name: 'dfe_hunt_load_pressure', help: 'Pressure curve P(b): peak, mean, flatness.', labelNames: stat, registers }),
    objective: new Gauge({ name: 'dfe_hunt_smoothing_objective', help: 'J = Σ P(b)² after the last planning cycle (never rises).', registers }),
    flatness: new Gauge({ name: 'dfe_hunt_smoothing_flatness', help: 'max P / mean P after the last planning cycle (1 = flat).', registers }),
    projectedFlatness: new Gauge({
      name: 'dfe_hunt_smoothing_projected_flatness',
      help: 'max P / mean P the planner projects: in observe, after the moves it would make; in on, after this cycle.',
      registers,
    }),
    memLimit: new Counter({
      name: 'dfe_hunt_mem_limit_total',
      help: 'Runs that failed with MEMORY_LIMIT_EXCEEDED (ClickHouse code 241).',
      labelNames: hunt,
      registers,
    }),
    memLimitCrashloops: new Counter({
      name: 'dfe_hunt_mem_limit_crashloop_total',
      help: 'Hunts auto-disabled for K code-241 failures within the window.',
      labelNames: hunt,
      registers,
    }),
    thresholdBreaches: new Counter({
      name: 'dfe_hunt_threshold_breach_total',
      help: 'Opt-in ceilings (p95 memory, CPU, duration) a hunt crossed; each disables it.',
      labelNames: ['hunt_id', 'resource'] as const,
      registers,
    }),
  };
}

const SECONDS_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600];

/** A fresh registry per runner, so several runners in one process never collide. */
export function createRunnerMetrics(registry = new Registry()): RunnerMetrics {
  const registers = [registry];
  return {
    registry,
    runs: new Counter({
      name: 'dfe_hunt_runs_total',
      help: 'Hunt runs by outcome (a failed fire stays owed and runs again).',
      labelNames: ['hunt_id', 'outcome'] as const,
      registers,
    }),
    runDuration: new Histogram({
      name: 'dfe_hunt_run_duration_seconds',
      help: 'Wall time of a hunt run, from the won claim to the release.',
      buckets: SECONDS_BUCKETS,
      registers,
    }),
    claims: new Counter({
      name: 'dfe_hunt_claims_total',
      help: 'Claim attempts: won, lost (another owner), late (insert acknowledged after settle), already_run (a peer ran the fire).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    overruns: new Counter({
      name: 'dfe_hunt_overruns_total',
      help: 'Fires that came due while this runner still held the lease of an earlier fire of the same hunt.',
      registers,
    }),
    backlog: new Gauge({ name: 'dfe_hunt_backlog', help: 'Due, unclaimed hunts at the last tick (the shim backlog query).', registers }),
    // For the "no heartbeat" alert (docs/operations.md): ticks go on while ClickHouse refuses
    // the heartbeat row, so only this tells a live runner that is invisible to its peers.
    lastHeartbeat: new Gauge({
      name: 'dfe_hunt_heartbeat_timestamp_seconds',
      help: 'Unix time (pod clock) at which this runner last wrote its heartbeat row to ClickHouse; 0 before the first.',
      registers,
    }),
    tickDuration: new Histogram({
      name: 'dfe_hunt_tick_duration_seconds',
      help: 'Wall time of one tick: heartbeat, due query and starting runs (not the runs).',
      buckets: SECONDS_BUCKETS,
      registers,
    }),
    fireLateness: new Histogram({
      name: 'dfe_hunt_fire_lateness_seconds',
      help: 'ClickHouse clock at the tick that started a run minus the fire it runs.',
      buckets: SECONDS_BUCKETS,
      registers,
    }),
    specErrors: new Counter({
      name: 'dfe_hunt_spec_errors_total',
      help: 'Hunt definition files skipped as invalid, counted at each load.',
      registers,
    }),
    // One series per hunt (bounded by the hunts directory); the ranges go to the log and hunt_run.
    catchupSkipped: new Counter({
      name: 'dfe_hunt_catchup_skipped_total',
      help: 'Runs whose window was cut to max_catchup after an outage: older data was skipped (log and hunt_run.skipped_from/_to say which).',
      labelNames: ['hunt_id'] as const,
      registers,
    }),
    // One series per hunt, like the catch-up counter.
    leaseLost: new Counter({
      name: 'dfe_hunt_lease_lost_total',
      help: 'Runs whose lease another runner took over while they went on (Keeper mode: a renewal found another token); that fire may run twice.',
      labelNames: ['hunt_id'] as const,
      registers,
    }),
    claimMode: new Gauge({
      name: 'dfe_hunt_runner_claim_mode',
      help: 'The claim mode in use: 1 for keeper (KeeperMap keys) or tables (the table protocol).',
      labelNames: ['mode'] as const,
      registers,
    }),
    smoothing: smoothingMetrics(registers),
    knownHunts: new Set<string>(),
  };
}
