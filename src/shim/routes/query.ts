import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DfeError, isDfeError, showValue } from '../../errors.js';
import { challengeOf } from '../auth.js';
import type { ShimContext } from '../context.js';
import { parseHold, validateParams, type RawQueryString } from '../params.js';

/**
 * The query routes: `/q/:name` and KEDA's two fixed paths. Auth (if enabled)
 * guards these only; a 401 happens before any cache or ClickHouse work.
 */
async function answerQuery(ctx: ShimContext, name: string, request: FastifyRequest, reply: FastifyReply) {
  const query = ctx.catalogue.current().queries.get(name);
  if (query === undefined) {
    // No metric series for unknown names: they are request input.
    throw new DfeError('QUERY_UNKNOWN', `unknown query ${showValue(name)}`, { query: name });
  }
  const raw = request.query as RawQueryString;
  let params;
  let hold;
  try {
    params = validateParams(query, raw);
    hold = parseHold(query, raw);
  } catch (err) {
    if (isDfeError(err, 'PARAM_INVALID')) ctx.metrics.countRequest(query.name, 'bad_request');
    throw err;
  }
  const answer = await ctx.executor.answer(query, params, hold);
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
 * The 200 body, compiled once by Fastify into a fast-json-stringify serialiser
 * (no JSON.stringify walk per answer). Same bytes as JSON.stringify of the
 * object the handler returns: the same keys in the same order, and the numbers
 * are finite (docs/performance.md). Errors (4xx/503) keep the default serialiser.
 */
const ANSWER_SCHEMA = {
  response: {
    200: {
      type: 'object',
      properties: {
        value: { type: 'number' },
        source: { type: 'string' },
        age_seconds: { type: 'number' },
      },
      required: ['value', 'source', 'age_seconds'],
      additionalProperties: false,
    },
  },
} as const;

export async function queryRoutes(app: FastifyInstance, ctx: ShimContext): Promise<void> {
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
  const schema = ANSWER_SCHEMA;
  app.get<{ Params: { name: string } }>('/q/:name', { schema }, (request, reply) => answerQuery(ctx, request.params.name, request, reply));
  app.get('/keda/hunt-backlog', { schema }, (request, reply) => answerQuery(ctx, 'backlog', request, reply));
  app.get('/keda/pressure', { schema }, (request, reply) => answerQuery(ctx, 'pressure', request, reply));
}
