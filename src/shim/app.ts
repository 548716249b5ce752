import { readFileSync } from 'node:fs';
import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { Registry } from 'prom-client';
import type { CatalogueEvent, CatalogueProvider, CompiledQuery } from '../catalogue/types.js';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import { systemClock, type Clock } from '../clock.js';
import type { ShimConfig } from '../config/load.js';
import { DfeError, describeError, showValue } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { tracingOn } from '../telemetry/trace.js';
import { AuthGuard } from './auth.js';
import { closingResponses } from './closing-response.js';
import type { ShimContext, ShimRouteOptions } from './context.js';
import { shimErrorHandler } from './error-handler.js';
import { QueryExecutor } from './executor.js';
import { LastGood } from './last-good/last-good.js';
import { lastGoodRoutes } from './last-good/route.js';
import { ShimMetrics } from './metrics.js';
import { healthRoutes } from './routes/health.js';
import { metricsRoutes } from './routes/metrics.js';
import { openApiRoutes } from './routes/openapi.js';
import { lazyChildLoggerOf } from './request-logger.js';
import { queryRoutes } from './routes/query.js';
import { statusRoutes } from './routes/status.js';
import { StatusBoard } from './status-board.js';
import { tracePolls } from './poll-span.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The shim's state: executor (query counter), metrics, status board. */
    readonly shim: ShimContext;
  }
}

export interface ShimDeps {
  /** Already loaded: the app is only built once a valid catalogue exists. */
  readonly catalogue: CatalogueProvider;
  readonly clickhouse: Pick<ClickHouseHandle, 'backend' | 'target' | 'client' | 'afterQueryError'>;
  readonly config: { readonly shim: ShimConfig };
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Default: a fresh Registry of its own. */
  readonly registry?: Registry;
}

/**
 * The routes and their error handler, as one plugin over a built context.
 * Each route group is a plugin of its own (routes/*.ts) registered with the
 * context as its options, so its hooks stay in its scope (the auth hook of
 * the query routes guards those only).
 */
export const shimPlugin: FastifyPluginAsync<ShimRouteOptions> = async (app, options) => {
  app.setErrorHandler(shimErrorHandler);
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: 'not found', query: null }));
  await app.register(healthRoutes, options);
  await app.register(metricsRoutes, options);
  await app.register(statusRoutes, options);
  await app.register(openApiRoutes, options);
  await app.register(queryRoutes, options);
  await app.register(lastGoodRoutes, options);
};

function onCatalogueEvent(ctx: ShimContext, logger: Logger, event: CatalogueEvent): void {
  if (event.kind === 'rejected') {
    ctx.metrics.reloads.inc({ result: 'rejected' });
    const fields = { file: event.file, err: event.error };
    if (event.empty === true) logger.warn(fields, 'catalogue file is empty (a write in progress?); the previous catalogue keeps serving');
    else logger.error(fields, 'catalogue reload rejected; the previous catalogue keeps serving');
    return;
  }
  ctx.metrics.reloads.inc({ result: 'applied' });
  ctx.executor.invalidate([...event.changed, ...event.removed]);
  for (const name of event.removed) {
    ctx.metrics.forgetQuery(name);
    ctx.status.forget(name);
  }
  ctx.metrics.knowQueries(event.catalogue.queries.keys());
  logger.info({ changed: event.changed, removed: event.removed }, 'catalogue reloaded');
  logCatalogueWarnings(logger, event.changed.map((name) => event.catalogue.queries.get(name)));
}

/** Settings that load but are probably mistakes (e.g. deadline_ms ≥ KEDA's HTTP timeout), once per load. */
function logCatalogueWarnings(logger: Logger, queries: Iterable<CompiledQuery | undefined>): void {
  for (const query of queries) {
    for (const w of query?.warnings ?? []) logger.warn({ file: w.file, query: w.query, key: w.key, value: w.value }, w.message);
  }
}

/** A file a setting names, read once at startup; an unreadable one is a config error naming the setting. */
function readConfiguredFile(path: string, key: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new DfeError('CONFIG_INVALID', `invalid ${key}=${showValue(path)}: ${describeError(err)}`, { key, value: path, cause: err });
  }
}

/**
 * Builds (does not start) the shim's Fastify instance. server.ts listens;
 * tests use `app.inject()`. TLS, when configured, is set here because Fastify
 * fixes its server type at construction.
 */
export async function buildShimApp(deps: ShimDeps): Promise<FastifyInstance> {
  const logger = deps.logger ?? silentLogger();
  const clock = deps.clock ?? systemClock;
  const shim = deps.config.shim;
  const auth = new AuthGuard(shim.auth, logger);
  await auth.prime();
  const metrics = new ShimMetrics(deps.registry);
  metrics.knowQueries(deps.catalogue.current().queries.keys());
  const status = new StatusBoard(clock);
  const lastGood = new LastGood({ shim, clock, logger, registry: metrics.registry });
  await lastGood.open((name) => deps.catalogue.current().queries.get(name)?.fingerprint);
  const executor = new QueryExecutor({
    clickhouse: deps.clickhouse,
    clock,
    logger,
    metrics,
    status,
    lastGood,
    admission: shim.admission,
    isLive: (name) => deps.catalogue.current().queries.has(name),
  });
  const ctx: ShimContext = {
    catalogue: deps.catalogue,
    clickhouse: deps.clickhouse,
    shim,
    executor,
    lastGood,
    auth,
    metrics,
    status,
    lifecycle: { state: 'starting' },
    grpc: { server: undefined },
  };
  // Mutual TLS (docs/security.md): with a client CA, the TLS handshake itself
  // refuses a client without a certificate signed by it — before any HTTP.
  const clientCa = shim.tls?.clientCaFile;
  const responses = closingResponses();
  const https = shim.tls
    ? {
        ServerResponse: responses.ServerResponse,
        cert: readConfiguredFile(shim.tls.certFile, 'DFE_KEDA_SHIM_TLS_CERT_FILE'),
        key: readConfiguredFile(shim.tls.keyFile, 'DFE_KEDA_SHIM_TLS_KEY_FILE'),
        ...(clientCa === undefined
          ? {}
          : { ca: readConfiguredFile(clientCa, 'DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE'), requestCert: true, rejectUnauthorized: true }),
      }
    : null;
  // The https option changes Fastify's server generic; routes do not care which server carries them.
  const app = Fastify({
    // No loggerInstance: Fastify given a logger times every answer and listens for its end, to log
    // it, which the shim never does (below). Each request still gets a logger of the shim's
    // (childLoggerFactory) and app.log is the shim's, so every line logged is as before.
    // KEDA polls every few seconds: per-request info logs are noise, and URLs may carry api_key.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLoggerOf(logger),
    ...(https ? { https } : { http: { ServerResponse: responses.ServerResponse } }),
  }) as unknown as FastifyInstance;
  app.log = logger;
  app.decorate('shim', ctx);
  logCatalogueWarnings(logger, deps.catalogue.current().queries.values());
  const unsubscribe = deps.catalogue.subscribe((event) => onCatalogueEvent(ctx, logger, event));
  app.addHook('onListen', async () => {
    ctx.lifecycle.state = 'listening';
  });
  app.addHook('preClose', async () => {
    ctx.lifecycle.state = 'closing';
    // Answers in flight end their keep-alive socket (closing-response.ts).
    responses.closeAfterAnswer();
  });
  app.addHook('onClose', async () => {
    unsubscribe();
    await lastGood.close();
  });
  // The per-answer debug line costs even when dropped, so the hook exists only at debug level.
  if (logger.isLevelEnabled('debug')) {
    app.addHook('onResponse', (request, reply, done) => {
      request.log.debug({ path: request.url.split('?')[0], status: reply.statusCode, ms: reply.elapsedTime }, 'answered');
      done();
    });
  }
  // A span per poll when tracing is on (poll-span.ts): it wraps the handlers of the routes registered below.
  if (tracingOn()) tracePolls(app);
  await app.register(shimPlugin, { ctx });
  return app;
}
