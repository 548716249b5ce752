import { recordingSpan, type Span } from '../telemetry/trace.js';
import type { Answer } from './decision.js';
import type { FailSafeReason } from './metrics.js';

/**
 * The cache decision of one poll, as attributes of its span
 * (docs/operations.md#traces):
 * - `dfe.cache.decision`: `young` (a cached value young enough, ClickHouse not
 *   asked), `started` (this poll started the query: its span is this poll's
 *   child), `joined` (another poll's query was in flight: its span is there),
 *   `refused` (too many queries in flight, none started);
 * - `dfe.answer.source`, `dfe.answer.age_seconds`: what was answered;
 * - `dfe.answer.reason`: why the fail-safe path answered (deadline, timeout,
 *   error, bad_result, overload), absent for a fresh answer.
 */
export type CacheDecision = 'young' | 'started' | 'joined' | 'refused';

/** The poll's span, if sampled: taken before the executor waits (the shim's context is synchronous). */
export function pollSpan(): Span | undefined {
  return recordingSpan();
}

export function traceAnswer(span: Span | undefined, query: string, decision: CacheDecision, answer: Answer, reason?: FailSafeReason): void {
  // The poll loop's hot path: nothing is built when tracing is off or the poll is not sampled.
  if (span === undefined) return;
  span.setAttributes({
    'dfe.query': query,
    'dfe.cache.decision': decision,
    'dfe.answer.source': answer.source,
    'dfe.answer.age_seconds': answer.ageSeconds,
    ...(reason === undefined ? {} : { 'dfe.answer.reason': reason }),
  });
}
