import type { Counter } from 'prom-client';
import type { DisableReason } from '../smoothing/store/hunt-state.js';
import type { RunnerMetrics, RunOutcome } from './metrics.js';

/**
 * Every hunt-labelled series the dashboard and the alert rules read exists from the first
 * scrape, at 0 for each known hunt (the Prometheus instrumentation guide: a series that
 * exists before its first event, so a panel shows 0 and `increase()` sees the first one).
 * Rebuilt each time the hunt set is loaded (then materialised): a new hunt's series are
 * made, a gone hunt's series removed. Gauges whose value is unknown until the planner
 * measures it (phase offset, interval, costs) are left to it.
 */
const RUN_OUTCOMES: readonly RunOutcome[] = ['succeeded', 'failed'];
const CEILINGS = ['memory', 'cpu', 'duration'] as const;
/** A record, so a new reason in hunt-state.ts fails the build here until it is listed. */
const REASONS: Readonly<Record<DisableReason, true>> = { mem_crashloop: true, ceiling_memory: true, ceiling_cpu: true, ceiling_duration: true };
export const DISABLE_REASONS = Object.keys(REASONS) as readonly DisableReason[];

/** The hunt-labelled counters, each with the other label sets it has per hunt. */
function counters(m: RunnerMetrics): ReadonlyArray<{ readonly counter: Counter<string>; readonly extra: Readonly<Record<string, string>> }> {
  const s = m.smoothing;
  return [
    ...RUN_OUTCOMES.map((outcome) => ({ counter: m.runs, extra: { outcome } })),
    { counter: m.catchupSkipped, extra: {} },
    { counter: m.leaseLost, extra: {} },
    { counter: s.phaseShifts, extra: {} },
    { counter: s.intervalBackoffs, extra: {} },
    { counter: s.promotions, extra: {} },
    { counter: s.memLimit, extra: {} },
    { counter: s.memLimitCrashloops, extra: {} },
    ...CEILINGS.map((resource) => ({ counter: s.thresholdBreaches, extra: { resource } })),
  ];
}

/** Makes each known hunt's series (a counter already counting keeps its count) and drops a gone hunt's. */
export function knowHunts(metrics: RunnerMetrics, huntIds: Iterable<string>): void {
  const now = new Set(huntIds);
  for (const huntId of metrics.knownHunts) if (!now.has(huntId)) forgetHunt(metrics, huntId);
  for (const huntId of now) {
    if (metrics.knownHunts.has(huntId)) continue;
    metrics.knownHunts.add(huntId);
    for (const { counter, extra } of counters(metrics)) counter.inc({ hunt_id: huntId, ...extra }, 0);
    // Until the first refresh from hunt_state (the first tick) says otherwise.
    for (const reason of DISABLE_REASONS) metrics.smoothing.autoDisabled.set({ hunt_id: huntId, reason }, 0);
  }
}

/**
 * dfe_hunt_autodisabled at 0 for every known hunt not in `disabled` and every reason; called
 * after a refresh from hunt_state, which sets only the 1s (and resets the rest away).
 */
export function zeroAutoDisabled(metrics: RunnerMetrics, disabled: ReadonlySet<string>): void {
  for (const huntId of metrics.knownHunts) {
    if (disabled.has(huntId)) continue;
    for (const reason of DISABLE_REASONS) metrics.smoothing.autoDisabled.set({ hunt_id: huntId, reason }, 0);
  }
}

function forgetHunt(metrics: RunnerMetrics, huntId: string): void {
  metrics.knownHunts.delete(huntId);
  const hunt = { hunt_id: huntId };
  for (const { counter, extra } of counters(metrics)) counter.remove({ ...hunt, ...extra });
  for (const reason of DISABLE_REASONS) metrics.smoothing.autoDisabled.remove({ ...hunt, reason });
  const s = metrics.smoothing;
  for (const gauge of [s.phaseOffset, s.intervalSeconds, s.costCpuSeconds, s.costMemBytes, s.costDurationSeconds]) gauge.remove(hunt);
}
