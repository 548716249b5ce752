import type { FastifyPluginAsync } from 'fastify';
import type { ShimRouteOptions } from '../context.js';
import { PROBE_SCHEMA } from './schemas.js';

/**
 * Probes. Neither touches ClickHouse: a ClickHouse outage must not restart or
 * unready the shim — serving held values through it is the point.
 */
const PROBE = { schema: { response: { 200: PROBE_SCHEMA, 503: PROBE_SCHEMA } } } as const;

export const healthRoutes: FastifyPluginAsync<ShimRouteOptions> = async (app, { ctx }) => {
  app.get('/livez', PROBE, async () => ({ status: 'ok' }));
  app.get('/readyz', PROBE, async (_request, reply) => {
    // The catalogue is loaded before the app is built, so listening is the last condition.
    if (ctx.lifecycle.state === 'listening') return { status: 'ready' };
    return reply.code(503).send({ status: ctx.lifecycle.state });
  });
};
