import { status, type StatusObject } from '@grpc/grpc-js';
import { ERRORS, isDfeError } from '../../errors.js';

/**
 * Errors → gRPC statuses, from the one table's HTTP status (src/errors.ts):
 * a client mistake (HTTP 400/404) is INVALID_ARGUMENT with the HTTP message,
 * stale (HTTP 503) is UNAVAILABLE so KEDA counts a failure and its fallback
 * can act; anything unexpected is INTERNAL with a fixed sentence.
 */
export type GrpcError = Pick<StatusObject, 'code' | 'details'>;

const BY_HTTP_STATUS: Readonly<Record<number, status>> = { 400: status.INVALID_ARGUMENT, 404: status.INVALID_ARGUMENT, 401: status.UNAUTHENTICATED, 503: status.UNAVAILABLE };

export function grpcErrorOf(err: unknown): GrpcError {
  if (isDfeError(err)) {
    const code = BY_HTTP_STATUS[ERRORS[err.code].httpStatus];
    if (code !== undefined) return { code, details: err.message };
  }
  return { code: status.INTERNAL, details: 'internal error' };
}

/** Whether the error is one the shim meant (a client mistake or stale), not a fault to log. */
export function isExpected(err: unknown): boolean {
  return grpcErrorOf(err).code !== status.INTERNAL;
}

/** `OK`, `INVALID_ARGUMENT`, … for the metrics' `code` label. */
export function codeName(code: status): string {
  return status[code] ?? String(code);
}
