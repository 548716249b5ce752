import type { ClickHouseClient } from '@clickhouse/client';
import type { AutoDisableConfig, SmoothingConfig } from '../../config/load.js';
import type { ClaimTiming } from '../../coordination/claims/table-claims.js';
import type { Coordinator } from '../../coordination/coordinator.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import type { Logger } from '../../log.js';
import type { HuntCeilings } from '../../schedule/ceilings.js';
import type { SmoothingMetrics } from '../metrics.js';
import { SmoothingController, type CycleOutcome } from './controller.js';
import { Escalation } from './escalation.js';

export type { CycleOutcome } from './controller.js';

/** What smoothing needs from the runner: where the tables are, and the hunts it has loaded. */
export interface RunnerSmoothingDeps {
  readonly client: ClickHouseClient;
  readonly database: string;
  readonly settings: CoordinationSettings;
  readonly smoothing: SmoothingConfig;
  readonly autoDisable: AutoDisableConfig;
  readonly metrics: SmoothingMetrics;
  readonly log: Logger;
  readonly runnerId: string;
  readonly timing: ClaimTiming;
  /** A loaded hunt's configured interval and own ceilings; undefined when not loaded here. */
  readonly hunt: (huntId: string) => { readonly intervalSeconds: number; readonly ceilings: HuntCeilings } | undefined;
}

/** The runner's one handle on smoothing and escalation (docs/smoothing.md). */
export interface RunnerSmoothing {
  /** After every finished run: the memory-limit crash-loop and the ceilings. Never throws. */
  afterRun(huntId: string, errorCode: number): Promise<void>;
  /** Sets dfe_hunt_autodisabled from hunt_state (any runner may disable). */
  refreshDisabled(): Promise<ReadonlySet<string>>;
  /** This slot's planning cycle, at most once per slot, in observe and on; undefined when off or not due. */
  maybePlan(coord: Coordinator, serverNowSeconds: number): Promise<CycleOutcome | undefined>;
}

export function createRunnerSmoothing(deps: RunnerSmoothingDeps): RunnerSmoothing {
  const { client, database, settings, metrics, log } = deps;
  const escalation = new Escalation({
    client,
    database,
    settings,
    config: deps.autoDisable,
    metrics,
    log,
    costWindowSeconds: deps.smoothing.costWindowSeconds,
    ceilingsOf: (huntId) => deps.hunt(huntId)?.ceilings,
  });
  const controller =
    deps.smoothing.mode === 'off'
      ? undefined
      : new SmoothingController({
          client,
          database,
          settings,
          config: deps.smoothing,
          escalation,
          metrics,
          log,
          runnerId: deps.runnerId,
          timing: deps.timing,
          configuredInterval: (huntId) => deps.hunt(huntId)?.intervalSeconds,
        });
  return {
    afterRun: (huntId, errorCode) => escalation.afterRun(huntId, errorCode),
    refreshDisabled: () => escalation.refreshGauge(),
    maybePlan: (coord, serverNowSeconds) => controller?.maybePlan(coord, serverNowSeconds) ?? Promise.resolve(undefined),
  };
}
