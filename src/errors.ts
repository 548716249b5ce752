/**
 * Every error this package raises on purpose. One class, a stable `code`, and
 * the file/key/value an operator needs to fix the input (bad input gets a clear
 * error naming the file, key and value).
 *
 * ERRORS is the one table of what each code means outside the process: the
 * HTTP status the shim answers with (src/shim/error-handler.ts) and the exit
 * code a CLI ends with (src/cli/shell.ts). docs/api.md#errors lists it; a test
 * (test/errors.test.ts) pins it.
 */
export interface ErrorTableRow {
  /** The shim's answer when a request meets this error. 500: never expected over HTTP. */
  readonly httpStatus: number;
  /** The exit code of a CLI that stops on this error: 2 for bad input, 1 for a failure on the way. */
  readonly exitCode: 1 | 2;
  /** What it means, for docs and readers. */
  readonly meaning: string;
}

/** Bad input: fix the command line, the environment or the request. Exit 2; 500 where HTTP never meets it. */
function badInput(meaning: string, httpStatus = 500): ErrorTableRow {
  return { httpStatus, exitCode: 2, meaning };
}

/** What a request can meet: its HTTP answer; a CLI that meets it failed on the way (exit 1). */
function answered(httpStatus: number, meaning: string): ErrorTableRow {
  return { httpStatus, exitCode: 1, meaning };
}

/** Files and setup a process stops on: exit 1, and never an answer over HTTP (500 if it were). */
function stopsProcess(meaning: string): ErrorTableRow {
  return { httpStatus: 500, exitCode: 1, meaning };
}

export const ERRORS = Object.freeze({
  USAGE: badInput('a CLI command, argument or flag combination that is not accepted'),
  CONFIG_INVALID: badInput('an environment variable or flag with an invalid value, or an unreadable file it names'),
  PARAM_INVALID: badInput('a missing or invalid request parameter, or a hunt id the CLI does not know', 400),
  QUERY_UNKNOWN: answered(404, 'a query name the catalogue does not have'),
  UNAUTHORIZED: answered(401, 'a request that fails the configured auth check'),
  STALE: answered(503, 'the last-good value is older than max_stale_seconds and ClickHouse gives no fresh one'),
  CLICKHOUSE_FAILED: answered(503, 'ClickHouse answered, but not with what the coordination protocol needs'),
  CATALOGUE_INVALID: stopsProcess('a query catalogue file that does not validate (file, query, key, value)'),
  CATALOGUE_MISSING: stopsProcess('a configured query catalogue file that does not exist'),
  HUNT_SPEC_INVALID: stopsProcess('a hunt file or hunt statement that does not validate'),
  IDENTIFIER_INVALID: stopsProcess('a database, table or column name that is not a plain identifier'),
  EMBEDDED_UNAVAILABLE: stopsProcess('no ClickHouse URL and the embedded engine (npm chdb) is not installed'),
} satisfies Record<string, ErrorTableRow>);

export type DfeErrorCode = keyof typeof ERRORS;

export interface DfeErrorDetails {
  readonly file?: string;
  readonly key?: string;
  readonly value?: unknown;
  readonly query?: string;
  readonly cause?: unknown;
  /** UNAUTHORIZED: the WWW-Authenticate challenge the answer carries, if the auth mode has one. */
  readonly challenge?: string;
}

export class DfeError extends Error {
  readonly code: DfeErrorCode;
  readonly file: string | undefined;
  readonly key: string | undefined;
  readonly value: unknown;
  readonly query: string | undefined;
  readonly challenge: string | undefined;

  constructor(code: DfeErrorCode, message: string, details: DfeErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'DfeError';
    this.code = code;
    this.file = details.file;
    this.key = details.key;
    this.value = details.value;
    this.query = details.query;
    this.challenge = details.challenge;
  }
}

export function isDfeError(err: unknown, code?: DfeErrorCode): err is DfeError {
  return err instanceof DfeError && (code === undefined || err.code === code);
}

/**
 * The exit code of a CLI that stops on `err`, from the table; node's own
 * argument-parser errors (unknown option, missing value) are usage errors too;
 * anything else is a failure on the way (1).
 */
export function exitCodeOf(err: unknown): 1 | 2 {
  if (isDfeError(err)) return ERRORS[err.code].exitCode;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS') ? 2 : 1;
}

/** A short, single-line description of any thrown value, safe for logs. */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const first = (err.message.split('\n')[0] ?? '').slice(0, 300);
    // Node's system errors already start their message with the code (`ENOENT: no such file…`).
    const prefixed = typeof code === 'string' && code !== '' && !first.startsWith(`${code}:`);
    return prefixed ? `${code}: ${first}` : first || err.name;
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
