import { pino, type Logger, type LoggerOptions } from 'pino';

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

export function loggerOptions(settings: LogSettings): LoggerOptions {
  const options: LoggerOptions = {
    level: settings.level,
    redact: { paths: [...new Set([...REDACT_PATHS, ...(settings.redact ?? [])])], censor: '[redacted]' },
    base: { pid: process.pid },
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
