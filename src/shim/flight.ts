import { performance } from 'node:perf_hooks';
import type { ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import type { CompiledQuery } from '../catalogue/types.js';
import { describeError } from '../errors.js';
import { tracedQuery } from '../clickhouse/traced-query.js';
import { ABORT_MARGIN_MS, firstRowSqlOf, ReadAbortedError, ResultTooLargeError, runCompact, type RawAnswer } from './clickhouse-query.js';
import type { DeclaredParams } from './key.js';
import type { QueryOutcome } from './metrics.js';
import { parseResult } from './result.js';
import { finalValue } from './value.js';

/**
 * One ClickHouse query for one cache key, shared by every request that joins
 * it (single-flight). It never rejects: it settles to a named outcome.
 */
export type FlightOutcome =
  | { readonly kind: 'ok'; readonly value: number }
  | { readonly kind: 'failed'; readonly reason: Exclude<QueryOutcome, 'success'>; readonly message: string };

export interface FlightReport {
  readonly outcome: FlightOutcome;
  readonly durationSeconds: number;
  /** Body bytes read (0 when no body came): bounded by MAX_RESULT_BYTES. */
  readonly bytesRead: number;
}

// ClickHouse's own TIMEOUT_EXCEEDED (code 159) and the client's abort both
// mean "took too long", which operators read differently from a broken query.
function isTimeout(err: unknown, signal: AbortSignal): boolean {
  if (signal.aborted) return true;
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === '159' || /Timeout exceeded/i.test(describeError(err));
}

export interface FlyOptions {
  /**
   * What the connection needs after a failed query: the handle's
   * `afterQueryError` (nothing on a server; on the embedded engine a drain of
   * the failed query's leftover output, src/clickhouse/embedded.ts). JSONCompact
   * is one JSON document, so an answer prefixed by such leftover fails to parse
   * and is held, never misread.
   */
  readonly afterError: ClickHouseHandle['afterQueryError'];
}

/**
 * The flight inside its ClickHouse span (src/clickhouse/traced-query.ts): a
 * child of the poll that started it, which other polls joining the flight
 * do not share.
 */
export function fly(client: ClickHouseClient, query: CompiledQuery, params: DeclaredParams, options: FlyOptions): Promise<FlightReport> {
  return tracedQuery(
    client,
    () => ({ name: query.name, operation: 'SELECT', text: firstRowSqlOf(query), attributes: { 'dfe.query': query.name } }),
    (headers) => flyOnce(client, query, params, options, headers),
    (report) => (report.outcome.kind === 'ok' ? undefined : report.outcome.reason),
  );
}

async function flyOnce(
  client: ClickHouseClient,
  query: CompiledQuery,
  params: DeclaredParams,
  options: FlyOptions,
  headers: Record<string, string> | undefined,
): Promise<FlightReport> {
  const run = await timedRun(client, query.timeoutSeconds, (signal) => runCompact(client, query, params, signal, headers), options);
  const outcome = run.kind === 'answered' ? judge(run.text, query) : run.outcome;
  return { outcome, durationSeconds: run.durationSeconds, bytesRead: run.bytesRead };
}

/** What one timed ClickHouse call gave: its complete body, or the failure it was. */
export type TimedRun = (
  | { readonly kind: 'answered'; readonly text: string }
  | { readonly kind: 'failed'; readonly outcome: Extract<FlightOutcome, { kind: 'failed' }> }
) & { readonly durationSeconds: number; readonly bytesRead: number };

/**
 * Runs `exec` under the flight's abort timer (timeout_seconds + ABORT_MARGIN_MS).
 * The server stops the query at max_execution_time; this timer is for a
 * server (or network) that does not: before the headers it aborts the
 * request, after them it destroys the body stream (readBounded) — either way
 * the socket is closed and this flight settles, so single-flight lets the
 * next poll start a new one (docs/failsafe.md#deadline-vs-timeout).
 */
export async function timedRun(
  client: ClickHouseClient,
  timeoutSeconds: number,
  exec: (signal: AbortSignal) => Promise<RawAnswer>,
  options: FlyOptions,
): Promise<TimedRun> {
  const controller = new AbortController();
  // performance.now(): the duration for the histogram, and what is left of the abort timer's limit.
  const started = performance.now();
  const took = () => (performance.now() - started) / 1000;
  let abortTimer: NodeJS.Timeout | undefined;
  try {
    const answer = exec(controller.signal);
    // Armed once the call is made, for what is left of the limit: the client library sends the
    // query only after a timer of its own, so this costs the answer no time (dispatch.ts).
    abortTimer = setTimeout(() => controller.abort(), timeoutSeconds * 1000 + ABORT_MARGIN_MS - (performance.now() - started));
    const { text, bytesRead } = await answer;
    return { kind: 'answered', text, bytesRead, durationSeconds: took() };
  } catch (err) {
    const bytesRead = err instanceof ResultTooLargeError || err instanceof ReadAbortedError ? err.bytesRead : 0;
    let outcome: Extract<FlightOutcome, { kind: 'failed' }>;
    if (err instanceof ResultTooLargeError) {
      outcome = { kind: 'failed', reason: 'bad_result', message: err.message };
    } else {
      const timeout = isTimeout(err, controller.signal);
      const message = timeout && controller.signal.aborted ? `no answer within ${timeoutSeconds} s (aborted)` : describeError(err);
      outcome = { kind: 'failed', reason: timeout ? 'timeout' : 'error', message };
    }
    await options.afterError(client, controller.signal.aborted);
    return { kind: 'failed', outcome, bytesRead, durationSeconds: took() };
  } finally {
    clearTimeout(abortTimer);
  }
}

/** A complete body → the flight's outcome: a servable number, or the failure it is. */
function judge(text: string, query: CompiledQuery): FlightOutcome {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { kind: 'failed', reason: 'bad_result', message: `the answer is not JSON: ${describeError(err)}` };
  }
  const parsed = parseResult(body, query.resultField);
  if (parsed.kind === 'number') return { kind: 'ok', value: finalValue(parsed.value, query) };
  if (parsed.kind === 'exception') return { kind: 'failed', reason: 'error', message: parsed.message };
  return { kind: 'failed', reason: 'bad_result', message: parsed.message };
}
