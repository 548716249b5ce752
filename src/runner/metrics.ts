import { Counter, Gauge, Histogram, Registry } from 'prom-client';

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
  readonly tickDuration: Histogram;
  readonly fireLateness: Histogram;
  readonly specErrors: Counter;
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
  };
}
