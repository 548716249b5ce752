import type { CompiledQuery } from '../catalogue/types.js';
import { DfeError, isDfeError, showValue } from '../errors.js';
import type { ShimContext } from './context.js';
import type { Answer, AnswerSource } from './decision.js';
import type { DeclaredParams } from './key.js';
import { parseHold, validateParams, type RawQueryString } from './params.js';

/**
 * The serving path every transport shares (HTTP routes, gRPC): catalogue
 * lookup, parameter checks (the messages of the HTTP 400/404), then the
 * executor (cache, single-flight, deadline, fail-safe answers). A transport
 * turns the DfeErrors thrown here into its own status (docs/api.md#errors).
 */
export type ServingContext = Pick<ShimContext, 'catalogue' | 'executor' | 'metrics'>;

/** A request that passed the checks: the live query and its validated inputs. */
export interface ServingRequest {
  readonly query: CompiledQuery;
  readonly params: DeclaredParams;
  readonly hold: number | undefined;
}

/** An answer a client may use: anything but `stale`. */
export type UsableAnswer = Extract<Answer, { readonly source: AnswerSource }>;

/** The live catalogue's query of that name; an unknown name is QUERY_UNKNOWN (HTTP 404). */
export function liveQuery(ctx: ServingContext, name: string): CompiledQuery {
  const query = ctx.catalogue.current().queries.get(name);
  if (query === undefined) {
    // No metric series for unknown names: they are request input.
    throw new DfeError('QUERY_UNKNOWN', `unknown query ${showValue(name)}`, { query: name });
  }
  return query;
}

/** Looks the query up and checks its declared params and `hold`; never touches ClickHouse. */
export function resolveRequest(ctx: ServingContext, name: string, raw: RawQueryString): ServingRequest {
  const query = liveQuery(ctx, name);
  try {
    return { query, params: validateParams(query, raw), hold: parseHold(query, raw) };
  } catch (err) {
    if (isDfeError(err, 'PARAM_INVALID')) ctx.metrics.countRequest(query.name, 'bad_request');
    throw err;
  }
}

/**
 * The answer, synchronously when a young cached value exists (no promise on
 * the hot path, docs/performance.md), else after at most the query's deadline.
 */
export function answerRequest(ctx: ServingContext, request: ServingRequest): Answer | Promise<Answer> {
  return ctx.executor.answerNowOrLater(request.query, request.params, request.hold);
}

/** The answer if a client may use it; `stale` is STALE (HTTP 503), handing the outage to KEDA's fallback. */
export function usable(query: CompiledQuery, answer: Answer): UsableAnswer {
  if (answer.source !== 'stale') return answer;
  throw new DfeError(
    'STALE',
    `last good value is ${answer.ageSeconds} s old (max_stale_seconds=${answer.maxStaleSeconds}); ClickHouse is failing`,
    { query: query.name },
  );
}
