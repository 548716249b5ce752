/**
 * Every error this package raises on purpose. One class, a stable `code`, and
 * the file/key/value an operator needs to fix the input (bad input gets a clear
 * error naming the file, key and value).
 */
export type DfeErrorCode =
  | 'CONFIG_INVALID'
  | 'CATALOGUE_INVALID'
  | 'CATALOGUE_MISSING'
  | 'IDENTIFIER_INVALID'
  | 'QUERY_UNKNOWN'
  | 'PARAM_INVALID'
  | 'RESULT_INVALID'
  | 'CLICKHOUSE_FAILED'
  | 'DEADLINE_PASSED'
  | 'STALE'
  | 'UNAUTHORIZED'
  | 'HUNT_SPEC_INVALID'
  | 'EMBEDDED_UNAVAILABLE'
  | 'USAGE';

export interface DfeErrorDetails {
  readonly file?: string;
  readonly key?: string;
  readonly value?: unknown;
  readonly query?: string;
  readonly cause?: unknown;
}

export class DfeError extends Error {
  readonly code: DfeErrorCode;
  readonly file: string | undefined;
  readonly key: string | undefined;
  readonly value: unknown;
  readonly query: string | undefined;

  constructor(code: DfeErrorCode, message: string, details: DfeErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'DfeError';
    this.code = code;
    this.file = details.file;
    this.key = details.key;
    this.value = details.value;
    this.query = details.query;
  }
}

export function isDfeError(err: unknown, code?: DfeErrorCode): err is DfeError {
  return err instanceof DfeError && (code === undefined || err.code === code);
}

/** A short, single-line description of any thrown value, safe for logs. */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const first = (err.message.split('\n')[0] ?? '').slice(0, 300);
    return typeof code === 'string' && code !== '' ? `${code}: ${first}` : first || err.name;
  }
  return String(err).slice(0, 300);
}

/** Renders a value for an error message without flooding it. */
export function showValue(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}
