import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ERRORS, isDfeError } from '../errors.js';

/**
 * Where errors become HTTP answers; the status of each code is in the one
 * table, src/errors.ts. Client mistakes show (404, 400, 401); a ClickHouse
 * fault arrives only as the executor's STALE (503). Anything else is a bug:
 * a 500 with a fixed sentence.
 */
export function statusOf(err: unknown): number {
  if (isDfeError(err)) return ERRORS[err.code].httpStatus;
  const status = (err as { statusCode?: unknown }).statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : 500;
}

export function shimErrorHandler(err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): void {
  const status = statusOf(err);
  const query = isDfeError(err) ? (err.query ?? null) : null;
  // A stale 503 is a ClickHouse failure the executor already logged, at most
  // once per key per minute (docs/failsafe.md#observability): logging it per request would flood.
  if (status >= 500 && !isDfeError(err, 'STALE')) request.log.error({ err }, 'request failed');
  if (isDfeError(err, 'UNAUTHORIZED') && err.challenge) void reply.header('www-authenticate', err.challenge);
  // An internal error's text may name internals; clients get a fixed sentence.
  const error = status >= 500 && !isDfeError(err) ? 'internal error' : err.message;
  void reply.code(status).send({ error, query });
}
