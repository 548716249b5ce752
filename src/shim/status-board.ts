import type { Clock } from '../clock.js';
import type { AnswerSource } from './decision.js';
import { ageSeconds } from './value.js';

/**
 * Per-query facts for `/status` (operators, not KEDA): the last value served,
 * how old it was, and the last ClickHouse failure. Keyed by catalogue query
 * name, so it is bounded by the catalogue.
 */
interface Row {
  lastValue?: number;
  lastSource?: AnswerSource;
  /** When ClickHouse produced the value last served. */
  valueAtMs?: number;
  lastError?: { readonly reason: string; readonly message: string; readonly atMs: number };
}

export interface QueryStatus {
  readonly lastValue: number | null;
  readonly lastSource: AnswerSource | null;
  readonly ageSeconds: number | null;
  readonly lastError: { readonly reason: string; readonly message: string; readonly at: string } | null;
}

export class StatusBoard {
  private readonly rows = new Map<string, Row>();

  constructor(private readonly clock: Clock) {}

  private row(query: string): Row {
    let row = this.rows.get(query);
    if (row === undefined) {
      row = {};
      this.rows.set(query, row);
    }
    return row;
  }

  served(query: string, source: AnswerSource, value: number, valueAtMs: number): void {
    // Field writes, not Object.assign: this runs on every answer.
    const row = this.row(query);
    row.lastValue = value;
    row.lastSource = source;
    row.valueAtMs = valueAtMs;
  }

  failed(query: string, reason: string, message: string): void {
    this.row(query).lastError = { reason, message, atMs: this.clock.nowMs() };
  }

  forget(query: string): void {
    this.rows.delete(query);
  }

  snapshot(query: string): QueryStatus {
    const row = this.rows.get(query) ?? {};
    const now = this.clock.nowMs();
    return {
      lastValue: row.lastValue ?? null,
      lastSource: row.lastSource ?? null,
      ageSeconds: row.valueAtMs === undefined ? null : ageSeconds(row.valueAtMs, now),
      lastError: row.lastError
        ? { reason: row.lastError.reason, message: row.lastError.message, at: new Date(row.lastError.atMs).toISOString() }
        : null,
    };
  }
}
