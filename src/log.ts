import { pino, type Logger, type LoggerOptions } from 'pino';
import { traceLogFields } from './telemetry/trace.js';

export type { Logger } from 'pino';

/**
 * Static redaction paths: credentials must never reach logs, whatever object
 * carries them (config dumps, request headers, client options).
 */
export const REDACT_PATHS: readonly string[] = Object.freeze([
  'password',
  '*.password',
  '*.*.password',
  'clickhouse.password',
  'config.clickhouse.password',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.query.api_key',
  'authorization',
  'token',
  '*.token',
]);

export interface LogSettings {
  readonly level: string;
  readonly format: 'json' | 'pretty';
  /** More paths to redact, e.g. a renamed API-key header or parameter (apiKeyRedactPaths). */
  readonly redact?: readonly string[];
}

/** The request paths that carry a configured API key (DFE_KEDA_SHIM_AUTH_API_KEY_HEADER / _PARAM). */
export function apiKeyRedactPaths(header: string, param: string): string[] {
  return [`req.headers[${JSON.stringify(header.toLowerCase())}]`, `req.query[${JSON.stringify(param)}]`];
}

/** `scheme://user:password@` anywhere in a text: what is between `//` and the last `@` of the authority. */
const URL_USERINFO = /([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s/?#]*@/g;

/** A text with the `user:password@` of every URL in it masked. */
export function maskUrlUserinfo(text: string): string {
  return text.replace(URL_USERINFO, '$1[redacted]@');
}

function maskStrings(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return maskUrlUserinfo(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => maskStrings(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[key] = maskStrings(v, depth + 1);
  return out;
}

/**
 * `{ err }` in a log call: pino's own error serialiser (type, message and
 * stack with their causes, the error's fields), then every URL's credentials
 * masked. A client error may quote the URL it was given (a DFE_CLICKHOUSE_URL
 * with `user:password@`), and the static redaction paths cannot see inside a
 * message or a stack.
 */
export function serializeError(err: unknown): unknown {
  return maskStrings(pino.stdSerializers.err(err as Error), 0);
}

export function loggerOptions(settings: LogSettings): LoggerOptions {
  const options: LoggerOptions = {
    level: settings.level,
    redact: { paths: [...new Set([...REDACT_PATHS, ...(settings.redact ?? [])])], censor: '[redacted]' },
    serializers: { err: serializeError },
    base: { pid: process.pid },
    // `trace_id`/`span_id` of the current sampled span when tracing is on (src/telemetry/trace.ts).
    mixin: traceLogFields,
  };
  if (settings.format === 'pretty') {
    options.transport = { target: 'pino-pretty', options: { colorize: true } };
  }
  return options;
}

export function createLogger(settings: LogSettings): Logger {
  return pino(loggerOptions(settings));
}

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
