import type { Readable } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';
import type { BindValue, CompiledQuery } from '../catalogue/types.js';
import type { DeclaredParams } from './key.js';

/**
 * The one ClickHouse call of the shim. Values travel as query parameters
 * (`{name:Type}` in the SQL, `query_params` here), never in the SQL text.
 * Only the first row matters (docs/failsafe.md#only-the-first-row): the SQL
 * is wrapped so ClickHouse sends at most one row, and the answer is read with
 * a byte cap and an abort that works at every stage of the response.
 */

/** Margin past `timeout_seconds` before the client gives up itself: the server's own limit should fire first. */
export const ABORT_MARGIN_MS = 500;

/**
 * Most bytes read of one answer. A one-row JSONCompact document is a few
 * hundred bytes; anything near this is not the answer we asked for.
 */
export const MAX_RESULT_BYTES = 1024 * 1024;

export function queryParams(query: CompiledQuery, params: DeclaredParams): Record<string, BindValue> {
  return { ...query.binds, ...params };
}

/**
 * `SELECT * FROM (<sql>) LIMIT 1`. Checked on the real engine
 * (test/shim/first-row.test.ts): it keeps the inner ORDER BY, column names and
 * SETTINGS, and bounds a UNION ALL too. Not the `max_result_rows=1` +
 * `result_overflow_mode='break'` settings: `break` stops at a block boundary
 * (tens of thousands of rows), and `throw` fails a query that legitimately
 * returns several rows. Not the `limit` setting: it leaves a UNION ALL
 * unbounded and, on the embedded engine, stays set on the session.
 * The newlines keep a trailing `-- comment` from swallowing the parenthesis.
 */
export function firstRowSql(sql: string): string {
  return `SELECT * FROM (\n${sql.trim().replace(/;+\s*$/, '')}\n) LIMIT 1`;
}

/** Per compiled query (frozen, replaced on reload): its first-row SQL and that SQL as sent, built once. */
const oneRow = new WeakMap<CompiledQuery, { readonly sql: string; readonly sent: string }>();

function oneRowOf(query: CompiledQuery): { readonly sql: string; readonly sent: string } {
  let texts = oneRow.get(query);
  if (texts === undefined) {
    const sql = firstRowSql(query.sql);
    texts = { sql, sent: compactText(sql) };
    oneRow.set(query, texts);
  }
  return texts;
}

/** `firstRowSql(query.sql)`, built once per compiled query. */
export function firstRowSqlOf(query: CompiledQuery): string {
  return oneRowOf(query).sql;
}

function compactText(sql: string): string {
  return `${sql}\nFORMAT JSONCompact`;
}

/** The answer was larger than MAX_RESULT_BYTES; reading stopped there. */
export class ResultTooLargeError extends Error {
  constructor(readonly bytesRead: number) {
    super(`the answer is larger than ${MAX_RESULT_BYTES} bytes (read ${bytesRead}); reading stopped`);
    this.name = 'ResultTooLargeError';
  }
}

/** The body did not come in time: the stream was destroyed. */
export class ReadAbortedError extends Error {
  constructor(readonly bytesRead: number) {
    super(`the answer stopped coming (${bytesRead} bytes read); its connection was closed`);
    this.name = 'ReadAbortedError';
  }
}

export interface RawAnswer {
  readonly text: string;
  readonly bytesRead: number;
}

/**
 * Reads a response body to its end, at most `maxBytes`. On `signal` (the
 * flight's timer) or past the cap, the stream is DESTROYED, which for an HTTP
 * response closes its socket: a stalled or trickling server holds nothing.
 */
export function readBounded(stream: Readable, maxBytes: number, signal: AbortSignal): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const finish = (err: Error | undefined) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
      // Late errors of a destroyed stream must not become unhandled.
      stream.on('error', () => undefined);
      if (err) {
        stream.destroy();
        reject(err);
      } else {
        resolve({ text: Buffer.concat(chunks, bytes).toString('utf8'), bytesRead: bytes });
      }
    };
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      bytes += buf.length;
      if (bytes > maxBytes) return finish(new ResultTooLargeError(bytes));
      chunks.push(buf);
    };
    const onEnd = () => finish(undefined);
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new ReadAbortedError(bytes));
    const onAbort = () => finish(new ReadAbortedError(bytes));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
    stream.once('close', onClose);
  });
}

export async function runCompact(
  client: ClickHouseClient,
  query: CompiledQuery,
  params: DeclaredParams,
  signal: AbortSignal,
  /** The W3C trace headers of the query's span, when traced (src/clickhouse/traced-query.ts). */
  headers?: Record<string, string>,
): Promise<RawAnswer> {
  return execText(client, oneRowOf(query).sent, queryParams(query, params), query.timeoutSeconds, signal, headers);
}

/**
 * Runs `sql` (a one-row wrap, or a batch query whose rows are all read) as
 * JSONCompact with `params` bound, and reads the body with the byte cap.
 */
export async function execCompact(
  client: ClickHouseClient,
  sql: string,
  params: Readonly<Record<string, BindValue | readonly string[]>>,
  timeoutSeconds: number,
  signal: AbortSignal,
  /** The W3C trace headers of the query's span, when traced (src/clickhouse/traced-query.ts). */
  headers?: Record<string, string>,
): Promise<RawAnswer> {
  return execText(client, compactText(sql), params, timeoutSeconds, signal, headers);
}

async function execText(
  client: ClickHouseClient,
  text: string,
  params: Readonly<Record<string, BindValue | readonly string[]>>,
  timeoutSeconds: number,
  signal: AbortSignal,
  headers: Record<string, string> | undefined,
): Promise<RawAnswer> {
  // exec hands back the raw body stream, so this code (not the client, which
  // detaches the abort signal once headers arrive) owns how long and how much
  // is read.
  const { stream } = await client.exec({
    query: text,
    query_params: params,
    abort_signal: signal,
    ...(headers === undefined ? {} : { http_headers: headers }),
    clickhouse_settings: {
      max_execution_time: timeoutSeconds,
      // nan/inf come back as strings instead of null, so they are rejected as
      // non-finite rather than read as a successful 0.
      output_format_json_quote_denormals: 1,
    },
  });
  return readBounded(stream, MAX_RESULT_BYTES, signal);
}
