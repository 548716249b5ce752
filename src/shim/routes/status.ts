import type { FastifyPluginAsync } from 'fastify';
import type { ShimContext, ShimRouteOptions } from '../context.js';

/**
 * JSON for operators: where the shim points (no credentials), what it loaded,
 * how each query fares. No response schema: the per-query part is whatever
 * status-board.ts reports, and a serialiser schema here would silently drop a
 * field added there; an operator's poll needs no precompiled serialiser.
 */
export const statusRoutes: FastifyPluginAsync<ShimRouteOptions> = async (app, { ctx }) => {
  app.get('/status', async () => {
    const catalogue = ctx.catalogue.current();
    const queries: Record<string, unknown> = {};
    for (const [name, query] of catalogue.queries) {
      queries[name] = { metric_type: query.metricType, params: query.params, ...snake(ctx.status.snapshot(name)) };
    }
    return {
      backend: ctx.clickhouse.backend,
      target: ctx.clickhouse.target,
      catalogue: {
        builtin: catalogue.source.builtinPath,
        override: catalogue.source.overridePath ?? null,
        override_hash: catalogue.source.overrideHash ?? null,
        loaded_at: new Date(catalogue.loadedAtMs).toISOString(),
      },
      // KEDA's external scaler port: its StreamIsActive streams and the shared checks behind them.
      grpc: ctx.grpc.server === undefined ? null : { address: ctx.grpc.server.address, open_streams: ctx.grpc.server.streams.size, stream_checks: ctx.grpc.server.streams.groupCount },
      cache_entries: ctx.executor.cacheSize,
      clickhouse_queries_started: ctx.executor.queriesStarted,
      queries,
    };
  });
};

function snake(status: ReturnType<ShimContext['status']['snapshot']>) {
  return {
    last_value: status.lastValue,
    last_source: status.lastSource,
    age_seconds: status.ageSeconds,
    last_error: status.lastError,
  };
}
