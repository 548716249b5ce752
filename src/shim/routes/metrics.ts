import type { FastifyPluginAsync } from 'fastify';
import type { ShimRouteOptions } from '../context.js';

/** Prometheus text (docs/api.md#metrics): no schema, the registry writes the body. */
export const metricsRoutes: FastifyPluginAsync<ShimRouteOptions> = async (app, { ctx }) => {
  app.get('/metrics', async (_request, reply) => {
    ctx.metrics.cacheEntries.set(ctx.executor.cacheSize);
    const body = await ctx.metrics.registry.metrics();
    return reply.header('content-type', ctx.metrics.registry.contentType).send(body);
  });
};
