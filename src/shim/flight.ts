import { performance } from 'node:perf_hooks';
import type { ClickHouseClient } from '@clickhouse/client';
import type { CompiledQuery } from '../catalogue/types.js';
import { describeError } from '../errors.js';
import { ABORT_MARGIN_MS, runCompact } from './clickhouse-query.js';
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
}

// ClickHouse's own TIMEOUT_EXCEEDED (code 159) and the client's abort both
// mean "took too long", which operators read differently from a broken query.
function isTimeout(err: unknown, signal: AbortSignal): boolean {
  if (signal.aborted) return true;
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === '159' || /Timeout exceeded/i.test(describeError(err));
}

/**
 * Sharp edge of the embedded engine (chdb 3.4): the partial output of a query
 * that FAILED (a format's header, rows written before the error) is prepended
 * to the next result on the same connection. JSONCompact is one JSON document,
 * so a prefixed answer fails to parse and is held, never misread; and after an
 * error one throwaway query drains the leftover so the next answer is clean.
 */
async function drainLeftover(client: ClickHouseClient): Promise<void> {
  try {
    const rs = await client.query({ query: 'SELECT 1', format: 'JSONCompactEachRow' });
    await rs.text();
  } catch {
    // Nothing to do: a broken engine shows on the next real query.
  }
}

export interface FlyOptions {
  /** Drain leftover output after an error (the embedded backend; see drainLeftover). */
  readonly drainAfterError: boolean;
}

export async function fly(
  client: ClickHouseClient,
  query: CompiledQuery,
  params: DeclaredParams,
  options: FlyOptions,
): Promise<FlightReport> {
  const controller = new AbortController();
  // The server stops the query at max_execution_time; this client-side abort is
  // for a server (or network) that does not answer at all.
  const abortTimer = setTimeout(() => controller.abort(), query.timeoutSeconds * 1000 + ABORT_MARGIN_MS);
  // performance.now() measures a duration for the histogram only; no decision depends on it.
  const started = performance.now();
  let outcome: FlightOutcome;
  try {
    const parsed = parseResult(await runCompact(client, query, params, controller.signal), query.resultField);
    outcome =
      parsed.kind === 'number'
        ? { kind: 'ok', value: finalValue(parsed.value, query) }
        : { kind: 'failed', reason: 'bad_result', message: parsed.message };
  } catch (err) {
    const timeout = isTimeout(err, controller.signal);
    const message = timeout && controller.signal.aborted ? `no answer within ${query.timeoutSeconds} s (aborted)` : describeError(err);
    outcome = { kind: 'failed', reason: timeout ? 'timeout' : 'error', message };
    // After an abort the engine may still be computing; the drain would queue
    // behind it, so it is not awaited there.
    if (options.drainAfterError) {
      if (timeout) void drainLeftover(client);
      else await drainLeftover(client);
    }
  } finally {
    clearTimeout(abortTimer);
  }
  return { outcome, durationSeconds: (performance.now() - started) / 1000 };
}
