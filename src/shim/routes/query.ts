import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { CompiledQuery } from '../../catalogue/types.js';
import { DfeError } from '../../errors.js';
import { challengeOf } from '../auth.js';
import type { ShimContext, ShimRouteOptions } from '../context.js';
import type { Answer } from '../decision.js';
import type { RawQueryString } from '../params.js';
import { answerRequest, resolveRequest, usable } from '../serve.js';
import { ANSWER_SCHEMA } from './schemas.js';

/**
 * The query routes: `/q/:name` and KEDA's two fixed paths, over the serving
 * path shared with gRPC (shim/serve.ts). Auth (if enabled) guards these only;
 * a 401 happens before any cache or ClickHouse work.
 */
interface AnswerBody {
  readonly value: number;
  readonly source: string;
  readonly age_seconds: number;
}

function bodyOf(query: CompiledQuery, answer: Answer, reply: FastifyReply): AnswerBody {
  void reply.header('cache-control', 'no-store');
  const served = usable(query, answer);
  return { value: served.value, source: served.source, age_seconds: served.ageSeconds };
}

/**
 * Not async: a young cached value (what KEDA's polls get nearly always) is
 * answered synchronously, with no promise or microtask between the request
 * and the serialiser (docs/performance.md). A thrown client mistake reaches
 * the error handler either way.
 */
function answerQuery(ctx: ShimContext, name: string, request: FastifyRequest, reply: FastifyReply): AnswerBody | Promise<AnswerBody> {
  const resolved = resolveRequest(ctx, name, request.query as RawQueryString);
  const answer = answerRequest(ctx, resolved);
  if (answer instanceof Promise) return answer.then((a) => bodyOf(resolved.query, a, reply));
  return bodyOf(resolved.query, answer, reply);
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
