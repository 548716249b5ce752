import { quoteColumn } from '../clickhouse/identifiers.js';
import { DfeError } from '../errors.js';

/**
 * A hunt statement's placeholders (docs/hunts.md). `{window}` is text, replaced by a
 * range over the hunt's validated, quoted `window_column`; the range's bounds and
 * any `{window_start:Int64}` / `{window_end:Int64}` the author wrote are bound
 * query parameters, so no value is ever spliced into SQL.
 */
export const WINDOW_PARAMS = Object.freeze(['window_start', 'window_end'] as const);
export type WindowParam = (typeof WINDOW_PARAMS)[number];

export interface CompiledStatement {
  readonly query: string;
  /** The bound parameters the query uses; only these are sent. */
  readonly params: readonly WindowParam[];
}

/** The window of one run, epoch seconds: `[start, end)`. */
export interface RunWindow {
  readonly startSeconds: number;
  readonly endSeconds: number;
}

const WINDOW_TOKEN = /\{\s*window\s*\}/g;
const PARAM_TOKEN = /\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([^{}]+?)\s*\}/g;

/** A statement problem: HUNT_SPEC_INVALID with the reason alone; the loader adds the file and key. */
function statementError(reason: string): DfeError {
  return new DfeError('HUNT_SPEC_INVALID', reason);
}

export function compileStatement(sql: string, windowColumn: string | undefined): CompiledStatement {
  let query = sql;
  if (sql.search(WINDOW_TOKEN) !== -1) {
    if (windowColumn === undefined) throw statementError('uses {window} but the hunt has no window_column');
    const col = quoteColumn(windowColumn, 'window_column');
    const range = `(${col} >= toDateTime64({window_start:Int64}, 3) AND ${col} < toDateTime64({window_end:Int64}, 3))`;
    query = sql.replace(WINDOW_TOKEN, range);
  }
  const used = new Set<WindowParam>();
  for (const [, name, type] of query.matchAll(PARAM_TOKEN)) {
    if (name !== 'window_start' && name !== 'window_end') {
      throw statementError(`uses the parameter {${name}:${type}}; only {window_start:Int64} and {window_end:Int64} are bound`);
    }
    if (type !== 'Int64') throw statementError(`binds {${name}:${type}}; it is epoch seconds, write {${name}:Int64}`);
    used.add(name);
  }
  return { query, params: WINDOW_PARAMS.filter((p) => used.has(p)) };
}

/** The query_params of one statement in one run. */
export function windowParams(statement: CompiledStatement, window: RunWindow): Record<string, number> {
  const params: Record<string, number> = {};
  for (const name of statement.params) params[name] = name === 'window_start' ? window.startSeconds : window.endSeconds;
  return params;
}

/** Window of a run (docs/hunts.md): from the last watermark, or fire − interval on a first run, to the fire. */
export function runWindow(fire: number, watermark: number | null, intervalSeconds: number): RunWindow {
  return { startSeconds: watermark ?? fire - intervalSeconds, endSeconds: fire };
}
