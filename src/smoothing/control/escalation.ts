import type { ClickHouseClient } from '@clickhouse/client';
import type { AutoDisableConfig } from '../../config/load.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import type { Logger } from '../../log.js';
import type { HuntCeilings } from '../../schedule/ceilings.js';
import { ceilingBreaches, effectiveCeilings } from '../ceiling-rules.js';
import type { CeilingResource, SmoothingMetrics } from '../metrics.js';
import type { HuntCost } from '../model.js';
import { readCosts } from '../store/cost-source.js';
import { countFailures, disableHunt, readDisabled, type DisableReason } from '../store/hunt-state.js';

/**
 * Auto-disable (docs/smoothing.md, "Auto-disable"), ON by default even with
 * smoothing off. After every failed run with ClickHouse code 241
 * (MEMORY_LIMIT_EXCEEDED) the runner that ran it counts the hunt's 241 failures
 * within the window; at K it disables the hunt in hunt_state, which the due SQL
 * skips from the next tick, materialise never touches, and only
 * `dfe-hunt-runner enable <hunt>` lifts. Opt-in ceilings on a hunt's p95 cost
 * (global, or per hunt in its file, which wins) disable the same way with their own reason. A disable is loud: a warning line
 * naming hunt and reason, the dfe_hunt_autodisabled gauge, `smoothing status`.
 */
export const MEMORY_LIMIT_EXCEEDED = 241;

export interface EscalationDeps {
  readonly client: ClickHouseClient;
  readonly database: string;
  readonly settings: CoordinationSettings;
  readonly config: AutoDisableConfig;
  readonly metrics: SmoothingMetrics;
  readonly log: Logger;
  /** Window of the p95s the ceilings are checked against (the cost window). */
  readonly costWindowSeconds: number;
  /** The hunt file's own `ceilings:` (undefined: none, or a hunt no longer loaded). */
  readonly ceilingsOf: (huntId: string) => HuntCeilings | undefined;
}

const hasAny = (c: HuntCeilings): boolean => c.memoryBytes !== undefined || c.cpuUs !== undefined || c.durationMs !== undefined;

const CEILING_REASON: Readonly<Record<CeilingResource, DisableReason>> = Object.freeze({
  memory: 'ceiling_memory',
  cpu: 'ceiling_cpu',
  duration: 'ceiling_duration',
});

export class Escalation {
  constructor(private readonly deps: EscalationDeps) {}

  private async disable(huntId: string, reason: DisableReason, detail: Record<string, unknown>): Promise<void> {
    const { client, database, settings, metrics, log } = this.deps;
    await disableHunt(client, database, settings, huntId, reason);
    metrics.autoDisabled.set({ hunt_id: huntId, reason }, 1);
    log.warn({ hunt: huntId, reason, ...detail }, `hunt ${huntId} auto-disabled (${reason}); lift with: dfe-hunt-runner enable ${huntId}`);
  }

  private ceilings(huntId: string): HuntCeilings {
    return effectiveCeilings(this.deps.config, this.deps.ceilingsOf(huntId));
  }

  /**
   * After a finished run (never throws: a failed check is logged and tried again
   * after the next run). Ceilings, when set, are checked here too, so they work
   * with smoothing off: the hunt's p95s from hunt_run over the cost window.
   */
  async afterRun(huntId: string, errorCode: number): Promise<void> {
    if (hasAny(this.ceilings(huntId))) {
      try {
        const { client, database, settings, costWindowSeconds } = this.deps;
        const measured = await readCosts(client, database, settings, 'hunt_run', costWindowSeconds, huntId);
        if ((await this.checkCeilings(measured.costs, new Set())).length > 0) return;
      } catch (err) {
        this.deps.log.warn({ hunt: huntId, err }, 'could not check the cost ceilings');
      }
    }
    if (errorCode !== MEMORY_LIMIT_EXCEEDED) return;
    const { client, database, settings, config, metrics, log } = this.deps;
    metrics.memLimit.inc({ hunt_id: huntId });
    const rule = config.memCrashloop;
    if (rule === null) return;
    try {
      const failures = await countFailures(client, database, settings, huntId, MEMORY_LIMIT_EXCEEDED, rule.windowSeconds);
      if (failures < rule.failures) return;
      metrics.memLimitCrashloops.inc({ hunt_id: huntId });
      await this.disable(huntId, 'mem_crashloop', { failures, windowSeconds: rule.windowSeconds });
    } catch (err) {
      log.warn({ hunt: huntId, err }, 'could not check or record a memory-limit crash-loop');
    }
  }

  /** Opt-in ceilings, checked on each planning cycle's cost model; returns the hunts disabled now. */
  async checkCeilings(costs: ReadonlyMap<string, HuntCost>, alreadyDisabled: ReadonlySet<string>): Promise<string[]> {
    const disabled: string[] = [];
    for (const [huntId, cost] of costs) {
      if (alreadyDisabled.has(huntId)) continue;
      const [first] = ceilingBreaches(cost, this.ceilings(huntId));
      if (first === undefined) continue;
      this.deps.metrics.thresholdBreaches.inc({ hunt_id: huntId, resource: first });
      await this.disable(huntId, CEILING_REASON[first], { resource: first, cost });
      disabled.push(huntId);
    }
    return disabled;
  }

  /** Sets dfe_hunt_autodisabled from hunt_state, so every runner shows what any runner disabled. */
  async refreshGauge(): Promise<ReadonlySet<string>> {
    const { client, database, settings, metrics } = this.deps;
    const rows = await readDisabled(client, database, settings);
    metrics.autoDisabled.reset();
    for (const r of rows) metrics.autoDisabled.set({ hunt_id: r.huntId, reason: r.reason }, 1);
    return new Set(rows.map((r) => r.huntId));
  }
}
