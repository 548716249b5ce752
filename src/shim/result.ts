import { showValue } from '../errors.js';
import { isServable, SERVABLE_RANGE_TEXT } from './value.js';

/**
 * Turning ClickHouse's answer into one number (docs/failsafe.md#what-is-answered). The query runs
 * with `FORMAT JSONCompact`, so column names (meta) and rows arrive together
 * and `result_field` can be an index or a name. The body is checked for the
 * shape that format promises before any cell is read: a 200 that is not that
 * shape is a failure, never a fresh value (docs/failsafe.md#what-is-a-failure).
 */
export interface CompactResult {
  readonly meta: readonly { readonly name: string; readonly type?: string }[];
  readonly data: readonly (readonly unknown[])[];
}

export type ParsedResult =
  | { readonly kind: 'number'; readonly value: number }
  /** A body that is not a result, or a cell that is not a servable number: the last good value holds. */
  | { readonly kind: 'invalid'; readonly message: string }
  /** ClickHouse reported an error inside a 200 body (23.8+, an error after the response started). */
  | { readonly kind: 'exception'; readonly message: string };

// ClickHouse quotes 64-bit integers and Decimals in JSON ("1000"), and, with
// output_format_json_quote_denormals=1, writes nan/inf as strings: parse only
// what is plainly a decimal number.
const NUMERIC_TEXT = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function toNumber(cell: unknown): number | undefined {
  if (typeof cell === 'number') return Number.isFinite(cell) ? cell : undefined;
  if (typeof cell === 'string' && NUMERIC_TEXT.test(cell.trim())) {
    const n = Number(cell.trim());
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isColumn(column: unknown): boolean {
  return isRecord(column) && typeof column.name === 'string';
}

/**
 * A parsed JSONCompact body → its meta and rows, or why it is not one:
 * `meta` a list of `{name}`, `data` a list of rows, each row an ARRAY of
 * exactly one cell per column (JSONCompact; rows as objects are another
 * format's answer). A present `exception` is ClickHouse's mid-stream error.
 */
export function checkCompactShape(body: unknown): { readonly ok: CompactResult } | Exclude<ParsedResult, { kind: 'number' }> {
  if (!isRecord(body)) return { kind: 'invalid', message: `the answer is not a JSONCompact object (${showValue(body)})` };
  if (body.exception !== undefined) {
    return { kind: 'exception', message: `ClickHouse reported an error mid-answer: ${showValue(body.exception)}` };
  }
  const { meta, data } = body;
  if (!Array.isArray(meta) || !meta.every(isColumn)) {
    return { kind: 'invalid', message: `"meta" is not a list of columns (${showValue(meta)})` };
  }
  if (!Array.isArray(data)) return { kind: 'invalid', message: `"data" is not a list of rows (${showValue(data)})` };
  // Indexed, not an entries() iterator: this runs on every fresh answer.
  for (let i = 0; i < data.length; i++) {
    const row: unknown = data[i];
    if (!Array.isArray(row)) return { kind: 'invalid', message: `row ${i} is not an array of cells (${showValue(row)})` };
    if (row.length !== meta.length) {
      return { kind: 'invalid', message: `row ${i} has ${row.length} cells for ${meta.length} columns` };
    }
  }
  return { ok: { meta: meta as CompactResult['meta'], data: data as CompactResult['data'] } };
}

function columnIndex(result: CompactResult, field: number | string): number | string {
  if (typeof field === 'number') {
    return field >= 0 && field < result.meta.length ? field : `column index ${field} is out of range (${result.meta.length} columns)`;
  }
  const index = result.meta.findIndex((column) => column.name === field);
  return index >= 0 ? index : `column ${showValue(field)} is not in the result (${result.meta.map((c) => c.name).join(', ')})`;
}

/**
 * Row 0, column `field`. No row, or NULL → a successful 0 (an empty backlog
 * is a real 0 and must replace the cache). A wrong shape, a cell that is not a
 * finite number, or one outside the servable range is invalid, which the
 * caller treats as a failure (the last-good value holds).
 */
export function parseResult(body: unknown, field: number | string): ParsedResult {
  const shape = checkCompactShape(body);
  if (!('ok' in shape)) return shape;
  const result = shape.ok;
  const row = result.data[0];
  if (row === undefined) return { kind: 'number', value: 0 };
  const index = columnIndex(result, field);
  if (typeof index === 'string') return { kind: 'invalid', message: index };
  const cell = row[index];
  if (cell === null || cell === undefined) return { kind: 'number', value: 0 };
  const value = toNumber(cell);
  if (value === undefined) return { kind: 'invalid', message: `result ${showValue(cell)} is not a finite number` };
  if (!isServable(value)) return { kind: 'invalid', message: `result ${showValue(cell)} is outside the servable range ${SERVABLE_RANGE_TEXT}` };
  return { kind: 'number', value };
}
