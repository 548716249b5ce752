import type { ClickHouseClient } from '@clickhouse/client';
import type { BindValue, CompiledQuery } from '../catalogue/types.js';
import type { DeclaredParams } from './key.js';
import type { CompactResult } from './result.js';

/**
 * The one ClickHouse call of the shim. Values travel as query parameters
 * (`{name:Type}` in the SQL, `query_params` here), never in the SQL text.
 */

/** Margin past `timeout_seconds` before the client gives up itself: the server's own limit should fire first. */
export const ABORT_MARGIN_MS = 500;

export function queryParams(query: CompiledQuery, params: DeclaredParams): Record<string, BindValue> {
  return { ...query.binds, ...params };
}

export async function runCompact(
  client: ClickHouseClient,
  query: CompiledQuery,
  params: DeclaredParams,
  signal: AbortSignal,
): Promise<CompactResult> {
  const rs = await client.query({
    query: query.sql,
    format: 'JSONCompact',
    query_params: queryParams(query, params),
    abort_signal: signal,
    clickhouse_settings: {
      max_execution_time: query.timeoutSeconds,
      // nan/inf come back as strings instead of null, so they are rejected as
      // non-finite rather than read as a successful 0.
      output_format_json_quote_denormals: 1,
    },
  });
  const json = await rs.json<unknown[]>();
  return { meta: json.meta ?? [], data: json.data };
}
