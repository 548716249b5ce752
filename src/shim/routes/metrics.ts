import type { FastifyInstance } from 'fastify';
import type { ShimContext } from '../context.js';

export async function metricsRoutes(app: FastifyInstance, ctx: ShimContext): Promise<void> {
  app.get('/metrics', async (_request, reply) => {
    ctx.metrics.cacheEntries.set(ctx.executor.cacheSize);
    const body = await ctx.metrics.registry.metrics();
    return reply.header('content-type', ctx.metrics.registry.contentType).send(body);
  });
}
