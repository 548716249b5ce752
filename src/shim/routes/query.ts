import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { CompiledQuery } from '../../catalogue/types.js';
import { DfeError, isDfeError, showValue } from '../../errors.js';
import { challengeOf } from '../auth.js';
import type { ShimContext, ShimRouteOptions } from '../context.js';
import type { Answer } from '../decision.js';
import type { DeclaredParams } from '../key.js';
import { parseHold, validateParams, type RawQueryString } from '../params.js';
import { ANSWER_SCHEMA } from './schemas.js';

/**
 * The query routes: `/q/:name` and KEDA's two fixed paths. Auth (if enabled)
 * guards these only; a 401 happens before any cache or ClickHouse work.
 */
interface AnswerBody {
  readonly value: number;
  readonly source: string;
  readonly age_seconds: number;
}

/** The live catalogue's query of that name; an unknown name is a 404. */
function liveQuery(ctx: ShimContext, name: string): CompiledQuery {
  const query = ctx.catalogue.current().queries.get(name);
  if (query === undefined) {
    // No metric series for unknown names: they are request input.
    throw new DfeError('QUERY_UNKNOWN', `unknown query ${showValue(name)}`, { query: name });
  }
  return query;
}

function bodyOf(query: CompiledQuery, answer: Answer, reply: FastifyReply): AnswerBody {
  void reply.header('cache-control', 'no-store');
  if (answer.source === 'stale') {
    throw new DfeError(
      'STALE',
      `last good value is ${answer.ageSeconds} s old (max_stale_seconds=${answer.maxStaleSeconds}); ClickHouse is failing`,
      { query: query.name },
    );
  }
  return { value: answer.value, source: answer.source, age_seconds: answer.ageSeconds };
}

/**
 * Not async: a young cached value (what KEDA's polls get nearly always) is
 * answered synchronously, with no promise or microtask between the request
 * and the serialiser (docs/performance.md). A thrown client mistake reaches
 * the error handler either way.
 */
function answerQuery(ctx: ShimContext, name: string, request: FastifyRequest, reply: FastifyReply): AnswerBody | Promise<AnswerBody> {
  const query = liveQuery(ctx, name);
  const raw = request.query as RawQueryString;
  let params: DeclaredParams;
  let hold: number | undefined;
  try {
    params = validateParams(query, raw);
    hold = parseHold(query, raw);
  } catch (err) {
    if (isDfeError(err, 'PARAM_INVALID')) ctx.metrics.countRequest(query.name, 'bad_request');
    throw err;
  }
  const cached = ctx.executor.cached(query, params);
  if (cached !== undefined) return bodyOf(query, cached, reply);
  return ctx.executor.answer(query, params, hold).then((answer) => bodyOf(query, answer, reply));
}

/**
 * Route options of the three paths: the answer's serialiser only. No querystring
 * schema: the declared params change with a reload, and params.ts checks them and
 * `hold` after the 401 and the 404 (docs/api.md#answers). No params schema either:
 * whether the live catalogue has the name is the 404 check.
 */
const ROUTE = { schema: { response: { 200: ANSWER_SCHEMA } } } as const;

export const queryRoutes: FastifyPluginAsync<ShimRouteOptions> = async (app, { ctx }) => {
  const { auth } = ctx;
  if (auth.settings.mode !== 'none') {
    app.addHook('preHandler', async (request) => {
      // An unreadable or empty secret denies (AuthGuard logs it once); it never lets a request through.
      const verdict = await auth.check({ headers: request.headers, query: request.query as RawQueryString }).catch(
        () => ({ kind: 'denied', reason: 'auth check failed' }) as const,
      );
      if (verdict.kind === 'denied') {
        throw new DfeError('UNAUTHORIZED', 'unauthorized', { challenge: challengeOf(auth.settings.mode) });
      }
    });
  }
  app.get<{ Params: { name: string } }>('/q/:name', ROUTE, (request, reply) => answerQuery(ctx, request.params.name, request, reply));
  app.get('/keda/hunt-backlog', ROUTE, (request, reply) => answerQuery(ctx, 'backlog', request, reply));
  app.get('/keda/pressure', ROUTE, (request, reply) => answerQuery(ctx, 'pressure', request, reply));
};
