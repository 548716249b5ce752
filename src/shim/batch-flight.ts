import type { ClickHouseClient } from '@clickhouse/client';
import type { BatchDefinition, CompiledQuery } from '../catalogue/types.js';
import { describeError, showValue } from '../errors.js';
import { tracedQuery } from '../clickhouse/traced-query.js';
import type { BindValue } from '../catalogue/types.js';
import { execCompact, queryParams } from './clickhouse-query.js';
import { timedRun, type FlightOutcome, type FlyOptions } from './flight.js';
import type { DeclaredParams } from './key.js';
import type { QueryOutcome } from './metrics.js';
import { checkCompactShape, parseResult, type CompactResult } from './result.js';
import { finalValue } from './value.js';

/**
 * One ClickHouse query for a batch of keys (docs/catalogue.md#batch): the
 * batched param's values bound as one array, every row `(param value, value)`.
 * Each key gets its own outcome: a key with no row gets the one-by-one
 * query's no-rows answer (a successful 0, then clamped), a key whose row is bad
 * fails alone, and only a failure of the whole query fails every key.
 */
export interface BatchReport {
  /** One outcome per requested value. */
  readonly outcomes: ReadonlyMap<string, FlightOutcome>;
  /** How the ClickHouse query itself went (the duration histogram's outcome). */
  readonly queryOutcome: QueryOutcome;
  readonly durationSeconds: number;
  readonly bytesRead: number;
}

export type BatchedQuery = CompiledQuery & { readonly batch: BatchDefinition };

export async function flyBatch(
  client: ClickHouseClient,
  query: BatchedQuery,
  values: readonly string[],
  fixed: DeclaredParams,
  options: FlyOptions,
): Promise<BatchReport> {
  const params = { ...queryParams(query, fixed), [query.batch.param]: values };
  return tracedQuery(
    client,
    () => ({ name: query.name, operation: 'SELECT', text: query.batch.sql, attributes: { 'dfe.query': query.name, 'dfe.batch.size': values.length } }),
    (headers) => flyBatchOnce(client, query, values, params, options, headers),
    (report) => (report.queryOutcome === 'success' ? undefined : report.queryOutcome),
  );
}

async function flyBatchOnce(
  client: ClickHouseClient,
  query: BatchedQuery,
  values: readonly string[],
  params: Readonly<Record<string, BindValue | readonly string[]>>,
  options: FlyOptions,
  headers: Record<string, string> | undefined,
): Promise<BatchReport> {
  const run = await timedRun(client, query.timeoutSeconds, (signal) => execCompact(client, query.batch.sql, params, query.timeoutSeconds, signal, headers), options);
  const whole = run.kind === 'answered' ? judgeBatch(run.text, values, query) : { failed: run.outcome };
  if ('failed' in whole) {
    return { outcomes: new Map(values.map((v) => [v, whole.failed])), queryOutcome: whole.failed.reason, durationSeconds: run.durationSeconds, bytesRead: run.bytesRead };
  }
  return { outcomes: whole.outcomes, queryOutcome: 'success', durationSeconds: run.durationSeconds, bytesRead: run.bytesRead };
}

type Failed = Extract<FlightOutcome, { kind: 'failed' }>;

/** A cell of the first column as the request spelled the value (params are strings), or undefined. */
function keyText(cell: unknown): string | undefined {
  if (typeof cell === 'string') return cell;
  if (typeof cell === 'number' && Number.isFinite(cell)) return String(cell);
  return undefined;
}

function judgeRow(result: CompactResult, rows: CompactResult['data'], query: CompiledQuery): FlightOutcome {
  const parsed = parseResult({ meta: result.meta, data: rows }, 1);
  if (parsed.kind === 'number') return { kind: 'ok', value: finalValue(parsed.value, query) };
  return { kind: 'failed', reason: parsed.kind === 'exception' ? 'error' : 'bad_result', message: `batch: ${parsed.message}` };
}

export function judgeBatch(text: string, values: readonly string[], query: CompiledQuery): { outcomes: Map<string, FlightOutcome> } | { failed: Failed } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { failed: { kind: 'failed', reason: 'bad_result', message: `the batch answer is not JSON: ${describeError(err)}` } };
  }
  const shape = checkCompactShape(body);
  if (!('ok' in shape)) return { failed: { kind: 'failed', reason: shape.kind === 'exception' ? 'error' : 'bad_result', message: shape.message } };
  const result = shape.ok;
  if (result.meta.length < 2) {
    return { failed: { kind: 'failed', reason: 'bad_result', message: `the batch answer has ${result.meta.length} column(s); it needs (param value, value)` } };
  }
  const wanted = new Set(values);
  const rowsOf = new Map<string, CompactResult['data'][number][]>();
  for (const row of result.data) {
    const key = keyText(row[0]);
    if (key === undefined || !wanted.has(key)) continue;
    const rows = rowsOf.get(key);
    if (rows === undefined) rowsOf.set(key, [row]);
    else rows.push(row);
  }
  const outcomes = new Map<string, FlightOutcome>();
  for (const value of values) {
    const rows = rowsOf.get(value) ?? [];
    if (rows.length > 1) {
      outcomes.set(value, { kind: 'failed', reason: 'bad_result', message: `batch: ${rows.length} rows for ${query.batch?.param ?? 'the param'}=${showValue(value)}; one row per key expected` });
    } else {
      outcomes.set(value, judgeRow(result, rows, query));
    }
  }
  return { outcomes };
}
