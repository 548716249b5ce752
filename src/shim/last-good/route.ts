import type { FastifyPluginAsync } from 'fastify';
import { DfeError } from '../../errors.js';
import { challengeOf } from '../auth.js';
import type { ShimRouteOptions } from '../context.js';
import { PEER_ROUTE } from './peer-client.js';

/**
 * `GET /internal/last-good?query=&fingerprint=&key=` (docs/api.md#internal-last-good):
 * a peer replica asks for one key's entry. Answered from the cache only —
 * never ClickHouse, never the peers — so lookups cannot loop. Guarded by the
 * auth of the query routes. 404 when this replica has no entry of that key
 * for the same compiled definition (query live here with that fingerprint).
 */
const MAX_KEY_LENGTH = 8192;

const QUERY_STRING = {
  type: 'object',
  required: ['query', 'fingerprint', 'key'],
  properties: {
    query: { type: 'string', minLength: 1, maxLength: 200 },
    fingerprint: { type: 'string', minLength: 1, maxLength: 64 },
    key: { type: 'string', minLength: 1, maxLength: MAX_KEY_LENGTH },
  },
} as const;

interface LookupQuery {
  readonly query: string;
  readonly fingerprint: string;
  readonly key: string;
}

export const lastGoodRoutes: FastifyPluginAsync<ShimRouteOptions> = async (app, { ctx }) => {
  const { auth } = ctx;
  if (auth.settings.mode !== 'none') {
    app.addHook('preHandler', async (request) => {
      const verdict = await auth.check({ headers: request.headers, query: request.query as Record<string, unknown> }).catch(
        () => ({ kind: 'denied', reason: 'auth check failed' }) as const,
      );
      if (verdict.kind === 'denied') throw new DfeError('UNAUTHORIZED', 'unauthorized', { challenge: challengeOf(auth.settings.mode) });
    });
  }
  app.get<{ Querystring: LookupQuery }>(PEER_ROUTE, { schema: { querystring: QUERY_STRING } }, async (request, reply) => {
    const { query: name, fingerprint, key } = request.query;
    void reply.header('cache-control', 'no-store');
    const found = ctx.lastGood.forPeer(ctx.catalogue.current().queries.get(name), fingerprint, key);
    if (found === undefined) return reply.code(404).send({ error: 'no last-good entry', query: name });
    return { value: found.value, age_seconds: found.ageSeconds };
  });
};
