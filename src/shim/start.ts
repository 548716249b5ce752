import type { FastifyInstance } from 'fastify';
import { CatalogueStore } from '../catalogue/store.js';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import { systemClock, type Clock } from '../clock.js';
import type { AppConfig } from '../config/load.js';
import { apiKeyRedactPaths, createLogger, type Logger } from '../log.js';
import { buildShimApp } from './app.js';
import { shimCatalogueBuiltins } from './catalogue-builtins.js';
import { startGrpcServer, type RunningGrpc } from './grpc/server.js';
import { listenShim } from './server.js';

export interface StartShimOptions {
  readonly config: AppConfig;
  /** An already-open ClickHouse (the all-in-one demo); it stays the caller's to close. Default: opened from config. */
  readonly clickhouse?: ClickHouseHandle;
  readonly logger?: Logger;
  readonly clock?: Clock;
}

export interface RunningShim {
  readonly app: FastifyInstance;
  /** Base URL it listens on, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly catalogue: CatalogueStore;
  /** The logger it writes to (given, or made from config with the API-key redaction paths). */
  readonly logger: Logger;
  /** The gRPC listener of KEDA's external scalers, when DFE_KEDA_SHIM_GRPC_PORT is set. */
  readonly grpc: RunningGrpc | undefined;
  /** Stops serving (in-flight answers finish), stops the catalogue reloads, then closes ClickHouse if startShim opened it. */
  close(): Promise<void>;
}

/**
 * Loads the catalogue (a bad one throws before ClickHouse is touched), opens
 * ClickHouse unless given, builds and listens. Signals are the caller's
 * (src/cli/shell.ts for the CLI and the demo).
 */
export async function startShim(options: StartShimOptions): Promise<RunningShim> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const { apiKeyHeader, apiKeyParam } = config.shim.auth;
  const logger = options.logger ?? createLogger({ ...config.log, redact: apiKeyRedactPaths(apiKeyHeader, apiKeyParam) });
  const catalogue = await CatalogueStore.open({
    builtinPath: config.shim.builtinCataloguePath,
    overridePath: config.shim.overridePath,
    dataDatabase: config.clickhouse.dataDatabase,
    otelDatabase: config.clickhouse.otelDatabase,
    builtins: shimCatalogueBuiltins(config.clickhouse.backlogRefreshSeconds),
    reloadIntervalMs: config.shim.reloadIntervalMs,
    maxQueries: config.shim.maxQueries,
    reservedParams: config.shim.auth.mode === 'apiKey' ? [config.shim.auth.apiKeyParam] : [],
    clock,
  });
  const owned = options.clickhouse === undefined;
  const clickhouse = options.clickhouse ?? (await openClickHouse(config.clickhouse));
  let app: FastifyInstance;
  try {
    app = await buildShimApp({ catalogue, clickhouse, clock, logger, config });
    catalogue.start();
  } catch (err) {
    if (owned) await clickhouse.close();
    throw err;
  }
  let closed: Promise<void> | undefined;
  let grpc: RunningGrpc | undefined;
  const closeRest = async () => {
    catalogue.stop();
    if (owned) await clickhouse.close();
  };
  // gRPC first (its streams end, KEDA reconnects elsewhere), then HTTP, then ClickHouse.
  const close = () => (closed ??= (grpc?.close() ?? Promise.resolve()).then(() => app.close()).then(closeRest));
  let url: string;
  try {
    url = await listenShim(app, { host: config.shim.host, port: config.shim.port });
    const settings = config.shim.grpc;
    if (settings !== undefined) {
      grpc = await startGrpcServer({ ctx: app.shim, shim: config.shim, port: settings.port, checkIntervalMs: settings.checkIntervalMs, logger });
    }
  } catch (err) {
    await close();
    throw err;
  }
  const source = catalogue.current().source;
  logger.info(
    { url, grpc: grpc?.address ?? null, backend: clickhouse.backend, target: clickhouse.target, builtin: source.builtinPath, override: source.overridePath ?? null },
    'dfe-keda-shim listening',
  );
  return { app, url, catalogue, logger, grpc, close };
}
