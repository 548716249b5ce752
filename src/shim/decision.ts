import type { MetricType } from '../catalogue/types.js';
import { ageSeconds } from './value.js';

/**
 * The fail-safe decision (docs/failsafe.md), pure: given what the cache holds and
 * the query's policy, what does a request get? See docs/failsafe.md.
 */
export interface GoodValue {
  readonly value: number;
  /** When ClickHouse produced it. */
  readonly atMs: number;
}

export type AnswerSource = 'fresh' | 'last_good' | 'cold_hold' | 'hold';

export type Answer =
  | { readonly source: AnswerSource; readonly value: number; readonly ageSeconds: number }
  /** 503: the last good value is too old to hold; KEDA's own fallback takes over. */
  | { readonly source: 'stale'; readonly ageSeconds: number; readonly maxStaleSeconds: number };

export interface FailSafePolicy {
  readonly coldHold: number;
  readonly metricType: MetricType;
  readonly freshForSeconds: number;
  readonly maxStaleSeconds: number | null;
}

/** Step 1: a good value young enough to reuse without asking ClickHouse, or undefined. */
export function reusable(entry: GoodValue | undefined, policy: FailSafePolicy, nowMs: number): Answer | undefined {
  if (entry === undefined || policy.freshForSeconds <= 0) return undefined;
  if (nowMs - entry.atMs >= policy.freshForSeconds * 1000) return undefined;
  return { source: 'fresh', value: entry.value, ageSeconds: ageSeconds(entry.atMs, nowMs) };
}

/**
 * Step 4: ClickHouse failed or the deadline passed. Order matters:
 * 1. a last-good value older than `max_stale_seconds` → stale (503), whatever
 *    else applies, so a long outage shows in KEDA's status;
 * 2. a `Value` query with `hold` → the trigger's target (neutral: the HPA keeps
 *    the current count, where a frozen value would keep scaling);
 * 3. last-good; 4. cold_hold.
 * `hold` on an `AverageValue` query is accepted and ignored: there a frozen
 * value already freezes the replica count.
 */
export function onFailure(entry: GoodValue | undefined, policy: FailSafePolicy, nowMs: number, hold: number | undefined): Answer {
  if (entry !== undefined && policy.maxStaleSeconds !== null) {
    const age = ageSeconds(entry.atMs, nowMs);
    if (age > policy.maxStaleSeconds) return { source: 'stale', ageSeconds: age, maxStaleSeconds: policy.maxStaleSeconds };
  }
  if (policy.metricType === 'Value' && hold !== undefined) return { source: 'hold', value: hold, ageSeconds: 0 };
  if (entry !== undefined) return { source: 'last_good', value: entry.value, ageSeconds: ageSeconds(entry.atMs, nowMs) };
  return { source: 'cold_hold', value: policy.coldHold, ageSeconds: 0 };
}

/** Whether a failure answer of a `Value` query fell back to last-good for want of `hold`. */
export function missedHold(policy: FailSafePolicy, hold: number | undefined): boolean {
  return policy.metricType === 'Value' && hold === undefined;
}
