#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { CatalogueStore } from '../catalogue/store.js';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import { systemClock, type Clock } from '../clock.js';
import { loadConfig, type AppConfig } from '../config/load.js';
import { DfeError, describeError, isDfeError } from '../errors.js';
import { apiKeyRedactPaths, createLogger, type Logger } from '../log.js';
import { buildShimApp } from '../shim/app.js';
import { installSignals, listenShim } from '../shim/server.js';

const USAGE = `Usage: dfe-keda-shim [run] [options]

Serves the query catalogue to KEDA's metrics-api trigger, fail-safe (SPEC §4, §5).
Every option has an environment twin; the option wins.

  --port <n>             listen port            (DFE_KEDA_SHIM_PORT, default 8080)
  --host <addr>          listen address         (DFE_KEDA_SHIM_HOST, default 0.0.0.0)
  --queries <file>       built-in catalogue     (DFE_KEDA_SHIM_BUILTIN_QUERIES, default the package's queries/queries.yaml)
  --override <file>      override catalogue     (DFE_KEDA_SHIM_QUERY_CONFIG; hot-reloaded, and on SIGHUP)
  --clickhouse-url <u>   ClickHouse HTTP URL    (DFE_CLICKHOUSE_URL; without it: the embedded engine)
  --embedded-path <dir>  embedded data dir      (DFE_EMBEDDED_PATH, default ./.dfe/clickhouse)
  -h, --help             this text

Exit codes: 0 after SIGTERM/SIGINT, 2 for a bad option or configuration, 1 for any
other startup failure (catalogue, ClickHouse, listen).`;

export interface StartShimOptions {
  readonly config: AppConfig;
  /** An already-open ClickHouse (the all-in-one demo); it stays the caller's to close. Default: opened from config. */
  readonly clickhouse?: ClickHouseHandle;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Install SIGTERM/SIGINT/SIGHUP handlers (close-with-grace). Default true; the demo handles its own. */
  readonly handleSignals?: boolean;
}

export interface RunningShim {
  readonly app: FastifyInstance;
  /** Base URL it listens on, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly catalogue: CatalogueStore;
  /** Stops serving, then closes the ClickHouse client if startShim opened it. */
  close(): Promise<void>;
}

/**
 * Loads the catalogue (a bad one throws before ClickHouse is touched), opens
 * ClickHouse unless given, builds and listens.
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
  const closeRest = async () => {
    catalogue.stop();
    if (owned) await clickhouse.close();
  };
  const close = () => (closed ??= app.close().then(closeRest));
  let url: string;
  try {
    url = await listenShim(app, { host: config.shim.host, port: config.shim.port });
  } catch (err) {
    await close();
    throw err;
  }
  if (options.handleSignals ?? true) {
    installSignals({ app, logger, onClosed: closeRest, reload: () => catalogue.reload() });
  }
  const source = catalogue.current().source;
  logger.info(
    { url, backend: clickhouse.backend, target: clickhouse.target, builtin: source.builtinPath, override: source.overridePath ?? null },
    'dfe-keda-shim listening',
  );
  return { app, url, catalogue, close };
}

function parseFlags(argv: readonly string[]): { help: boolean; flags: Record<string, string | undefined> } {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      queries: { type: 'string' },
      override: { type: 'string' },
      'clickhouse-url': { type: 'string' },
      'embedded-path': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const extra = positionals[0] === 'run' ? positionals.slice(1) : positionals;
  if (extra.length > 0) throw new DfeError('USAGE', `unknown command ${extra.join(' ')} (only "run")`);
  const { help, ...flags } = values;
  return { help: help === true, flags: flags as Record<string, string | undefined> };
}

/** The exit code a startup failure gets: 2 for usage and configuration, 1 for the rest. */
export function exitCodeOf(err: unknown): number {
  if (isDfeError(err, 'CONFIG_INVALID') || isDfeError(err, 'USAGE')) return 2;
  // parseArgs' own errors (unknown option, missing value) are usage errors too.
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS') ? 2 : 1;
}

/** Runs the CLI. Resolves with the running shim, or an exit code when it will not run. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<RunningShim | number> {
  try {
    const { help, flags } = parseFlags(argv);
    if (help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    return await startShim({ config: loadConfig(env, flags) });
  } catch (err) {
    // One line an operator can act on: it names the key or file (DfeError messages do).
    const line = isDfeError(err) ? (err.message.split('\n')[0] ?? err.code) : describeError(err);
    process.stderr.write(`dfe-keda-shim: ${line}\n`);
    return exitCodeOf(err);
  }
}

function invokedDirectly(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  const result = await main(process.argv.slice(2));
  if (typeof result === 'number') process.exit(result);
}
