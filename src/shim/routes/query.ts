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
    if (isDfeError(err, 'PARAM_INVALID')) ctx.metrics.requests.inc({ query: query.name, source: 'bad_request' });
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

export async function queryRoutes(app: FastifyInstance, ctx: ShimContext): Promise<void> {
  const { auth } = ctx;
  if (auth.settings.mode !== 'none') {
    app.addHook('preHandler', async (request) => {
      // An unreadable or empty secret denies (AuthGuard logs it once); it never lets a request through.
      const verdict = await auth.check({ headers: request.headers, query: request.query as RawQueryString }).catch(
        () => ({ kind: 'denied', reason: 'auth check failed' }) as const,
      );
      if (verdict.kind === 'denied') {
        const err = new DfeError('UNAUTHORIZED', 'unauthorized');
        throw Object.assign(err, { challenge: challengeOf(auth.settings.mode) });
      }
    });
  }
  app.get<{ Params: { name: string } }>('/q/:name', (request, reply) => answerQuery(ctx, request.params.name, request, reply));
  app.get('/keda/hunt-backlog', (request, reply) => answerQuery(ctx, 'backlog', request, reply));
  app.get('/keda/pressure', (request, reply) => answerQuery(ctx, 'pressure', request, reply));
}
