import { showValue } from '../errors.js';

/**
 * Turning ClickHouse's answer into one number (docs/failsafe.md#what-is-answered). The query runs
 * with `FORMAT JSONCompact`, so column names (meta) and rows arrive together
 * and `result_field` can be an index or a name.
 */
export interface CompactResult {
  readonly meta: readonly { readonly name: string; readonly type?: string }[];
  readonly data: readonly (readonly unknown[])[];
}

export type ParsedResult =
  | { readonly kind: 'number'; readonly value: number }
  | { readonly kind: 'invalid'; readonly message: string };

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

function columnIndex(result: CompactResult, field: number | string): number | string {
  if (typeof field === 'number') {
    return field >= 0 && field < result.meta.length ? field : `column index ${field} is out of range (${result.meta.length} columns)`;
  }
  const index = result.meta.findIndex((column) => column.name === field);
  return index >= 0 ? index : `column ${showValue(field)} is not in the result (${result.meta.map((c) => c.name).join(', ')})`;
}

/**
 * Row 0, column `field`. No row, or NULL → a successful 0 (an empty backlog
 * is a real 0 and must replace the cache). Anything not a finite number is
 * invalid, which the caller treats as a failure (the last-good value holds).
 */
export function parseResult(result: CompactResult, field: number | string): ParsedResult {
  const row = result.data[0];
  if (row === undefined) return { kind: 'number', value: 0 };
  const index = columnIndex(result, field);
  if (typeof index === 'string') return { kind: 'invalid', message: index };
  const cell = row[index];
  if (cell === null || cell === undefined) return { kind: 'number', value: 0 };
  const value = toNumber(cell);
  if (value === undefined) return { kind: 'invalid', message: `result ${showValue(cell)} is not a finite number` };
  return { kind: 'number', value };
}
