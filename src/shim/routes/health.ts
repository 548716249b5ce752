import type { FastifyInstance } from 'fastify';
import type { ShimContext } from '../context.js';

/**
 * Probes. Neither touches ClickHouse: a ClickHouse outage must not restart or
 * unready the shim — serving held values through it is the point.
 */
export async function healthRoutes(app: FastifyInstance, ctx: ShimContext): Promise<void> {
  app.get('/livez', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    // The catalogue is loaded before the app is built, so listening is the last condition.
    if (ctx.lifecycle.state === 'listening') return { status: 'ready' };
    return reply.code(503).send({ status: ctx.lifecycle.state });
  });
}
