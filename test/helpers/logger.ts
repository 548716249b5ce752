import { pino } from 'pino';
import { loggerOptions, type Logger } from '../../src/log.js';

/** A real pino logger (the production options and redaction paths) whose JSON lines a test reads back. */
export function capturingLogger(level = 'info'): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) };
  return { logger: pino(loggerOptions({ level, format: 'json' }), stream), lines };
}
