import type { ClickHouseClient, ClickHouseSettings } from '@clickhouse/client';
import { tracedQuery } from '../clickhouse/traced-query.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import { windowParams, type RunWindow } from '../schedule/window.js';

/**
 * Runs one fire's statements in order (docs/runner.md#a-tick, step 5). Every statement
 * carries the hunt's settings, a JSON `log_comment` that query_log attributes
 * back to the hunt, and `insert_deduplication_token = <hunt_id>:<start>-<end>:<n>`, so
 * a repeated run of the same window inserts nothing twice where the target table
 * deduplicates (replicated tables, or a non_replicated_deduplication_window).
 */
export function statementSettings(spec: HuntSpec, fire: number, index: number, window: RunWindow): ClickHouseSettings {
  return {
    ...(spec.settings as ClickHouseSettings),
    log_comment: JSON.stringify({ feature: 'hunts', kind: 'hunt', id: spec.huntId, fire }),
    insert_deduplication_token: dedupToken(spec.huntId, window, index),
  };
}

/** `<hunt_id>:<start>-<end>:<n>`: two runs of one claimed window write one copy (docs/claim-protocol.md#the-invariant). */
export function dedupToken(huntId: string, window: RunWindow, index: number): string {
  return `${huntId}:${window.startSeconds}-${window.endSeconds}:${index}`;
}

/**
 * The hunt's own settings keys, to reset on an embedded session after a run
 * (see src/clickhouse/embedded.ts). log_comment and the dedup token need no reset: every
 * statement sets its own and every coordination write sets them empty.
 */
export function runSettingKeys(spec: HuntSpec): string[] {
  return Object.keys(spec.settings);
}

export interface ExecuteOptions {
  readonly signal?: AbortSignal;
  /** The window the claim owns (before a catch-up cut), for the dedup token; default the run's window. */
  readonly dedupWindow?: RunWindow;
  /** Called before each statement; tests use it to stop a runner mid-run. */
  readonly onStatement?: (index: number) => void;
}

/**
 * What one run cost, from ClickHouse's response summary (docs/smoothing.md, cost
 * model). `elapsed_ns` is summed over the statements; `memory_usage` (peak bytes)
 * is read where the server's X-ClickHouse-Summary carries it (recent servers; the
 * embedded engine's summary has elapsed_ns only). No summary carries CPU time: 0
 * means "unknown" and the cost model takes duration × 1 core.
 */
export interface RunCost {
  readonly rowsWritten: number;
  /** Summed elapsed_ns of the statements, in ms; undefined when no summary carried it. */
  readonly elapsedMs: number | undefined;
  readonly memoryBytes: number;
}

type Summary = Record<string, string | undefined> | undefined;

function summaryNumber(summary: Summary, key: string): number {
  const value = Number(summary?.[key] ?? 0);
  return Number.isFinite(value) && value > 0 ? value : 0;
}

export async function executeFire(
  client: ClickHouseClient,
  spec: HuntSpec,
  fire: number,
  window: RunWindow,
  options: ExecuteOptions = {},
): Promise<RunCost> {
  let rowsWritten = 0;
  let elapsedNs = 0;
  let memoryBytes = 0;
  for (const [index, statement] of spec.statements.entries()) {
    options.signal?.throwIfAborted();
    options.onStatement?.(index);
    // Checked again after the hook: a runner stopped by it must not send the statement.
    options.signal?.throwIfAborted();
    // A child span of the hunt run (src/clickhouse/traced-query.ts); a server gets its traceparent.
    const operation = /^\s*(\w+)/.exec(statement.query)?.[1]?.toUpperCase() ?? 'QUERY';
    const span = { name: spec.huntId, operation, text: statement.query, attributes: { 'dfe.hunt.id': spec.huntId, 'dfe.hunt.statement': index } };
    const result = await tracedQuery(
      client,
      span,
      (headers) =>
        client.command({
          query: statement.query,
          query_params: windowParams(statement, window),
          clickhouse_settings: statementSettings(spec, fire, index, options.dedupWindow ?? window),
          ...(options.signal ? { abort_signal: options.signal } : {}),
          ...(headers === undefined ? {} : { http_headers: headers }),
        }),
      () => undefined,
    );
    rowsWritten += Number(result.summary?.written_rows ?? 0) || 0;
    const summary = result.summary as Summary;
    elapsedNs += summaryNumber(summary, 'elapsed_ns');
    memoryBytes = Math.max(memoryBytes, summaryNumber(summary, 'memory_usage'));
  }
  return { rowsWritten, elapsedMs: elapsedNs > 0 ? elapsedNs / 1e6 : undefined, memoryBytes };
}
