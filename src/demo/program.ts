/**
 * `npm start`: the whole system in one process on the embedded ClickHouse
 * (libchdb allows one process per data directory, so the shim and the runner
 * share it): apply the schema, create and feed the demo tables, materialise
 * examples/hunts, start the runner loop and the shim, print what to curl.
 * Set DFE_CLICKHOUSE_URL to run the same demo against a server.
 */
import { fileURLToPath } from 'node:url';
import type { ClickHouseClient } from '@clickhouse/client';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import { loadConfig, type AppConfig } from '../config/load.js';
import { createLogger, type Logger } from '../log.js';
import { createDemoTables, seedRecentHistory, startEventFeeder } from './demo-data.js';
import { dueCountSql } from '../coordination/due-sql.js';
import { applySchema, coordinationSettings, resolveTopology } from '../coordination/topology.js';
import { probeAndRecord } from '../coordination/claims/mode.js';
import type { RunnerMetrics } from '../runner/metrics.js';
import { startRunner } from '../runner/start.js';
import { createOtelGaugeTable } from '../pressure/otel-table.js';
import { DEMO_PRESSURE_SERVICES, startPressureFeeder } from './pressure-feeder.js';
import { isGrpcPortTaken } from '../shim/grpc/server.js';
import { startShim, type RunningShim } from '../shim/start.js';

const EXAMPLE_HUNTS = fileURLToPath(new URL('../../../examples/hunts', import.meta.url));
/** testkeeper + KeeperMap in-process, so the demo's runner claims through Keeper (docs/claim-protocol.md#keeper-mode). */
const EMBEDDED_KEEPER = fileURLToPath(new URL('../../../examples/embedded-keeper.xml', import.meta.url));

/** Demo defaults, each overridable by its environment variable. */
const DEMO_ENV: Readonly<Record<string, string>> = Object.freeze({
  DFE_HUNTS_DIR: EXAMPLE_HUNTS,
  DFE_EMBEDDED_CONFIG_FILE: EMBEDDED_KEEPER,
  DFE_HUNT_RUNNER_POLL_SECONDS: '5',
  // The dashboard's load panels move within a minute (the default cycle is 300 s).
  DFE_HUNT_SMOOTHING_CYCLE_SECONDS: '30',
  DFE_KEDA_SHIM_HOST: '127.0.0.1',
  // KEDA's external scaler protocol beside HTTP, as the chart's `external` trigger types use it.
  DFE_KEDA_SHIM_GRPC_PORT: '9090',
  LOG_LEVEL: 'warn',
});

/** The demo's config: the environment over the demo defaults. */
export function demoConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  return loadConfig({ ...DEMO_ENV, ...env });
}

export interface RunningDemo {
  readonly logger: Logger;
  /** Stops the shim, the runner (in-flight runs finish), the feeders, then ClickHouse. */
  close(): Promise<void>;
}

/**
 * The demo's shim. Its gRPC port is a convenience (9090 is also Prometheus's default), so one
 * already taken moves to a free port, said in one line, instead of stopping the demo; the
 * banner prints the address it got. The HTTP port stays strict (the README's curls name it).
 */
async function startDemoShim(config: AppConfig, logger: Logger): Promise<RunningShim> {
  try {
    return await startShim({ config, logger });
  } catch (err) {
    const grpc = config.shim.grpc;
    if (grpc === undefined || !isGrpcPortTaken(err)) throw err;
    logger.warn(`demo: gRPC port ${grpc.port} is taken; the demo's gRPC port is a free one instead (see below)`);
    return startShim({ config: { ...config, shim: { ...config.shim, grpc: { ...grpc, port: 0 } } }, logger });
  }
}

/** Starts the demo; rejects if startup fails (everything started so far is stopped first). Signals are the caller's. */
export async function startDemo(config: AppConfig): Promise<RunningDemo> {
  const logger = createLogger(config.log);
  const handle = await openClickHouse(config.clickhouse);
  // What is running so far, stopped newest first if startup fails (a port already taken):
  // exiting with the embedded engine busy crashes it (SIGSEGV) instead of a clean exit 1.
  const started: (() => Promise<void>)[] = [() => handle.close()];
  try {
    return await startAll(config, logger, handle, started);
  } catch (err) {
    for (const stop of started.reverse()) await stop().catch(() => undefined);
    throw err;
  }
}

async function startAll(config: AppConfig, logger: Logger, handle: ClickHouseHandle, started: (() => Promise<void>)[]): Promise<RunningDemo> {
  const ch = config.clickhouse;
  const topology = await resolveTopology(handle.client, ch);
  await applySchema(handle.client, ch.dataDatabase, topology, ch);
  // As `schema --apply`: probe KeeperMap and record the claim mode the runner follows.
  await probeAndRecord(handle.client, ch.dataDatabase, topology, coordinationSettings(topology).write);
  await createDemoTables(handle.client, ch.dataDatabase);
  await handle.client.command({ query: `CREATE DATABASE IF NOT EXISTS \`${ch.otelDatabase}\`` });
  await createOtelGaugeTable(handle.client, ch.otelDatabase);

  // Two minutes of past events first, so the hunts' first runs (which cover the interval
  // before start) already find the attack bursts: a detection within seconds, not minutes.
  await seedRecentHistory(handle.client, ch.dataDatabase, Date.now());
  const onFeedError = (err: unknown) => logger.warn({ err }, 'demo feeder write failed');
  const events = startEventFeeder(handle.client, ch.dataDatabase, { onError: onFeedError });
  const pressure = startPressureFeeder({ client: handle.client, database: ch.otelDatabase, onError: onFeedError });
  started.push(() => Promise.all([events.stop(), pressure.stop()]).then(() => undefined));
  const runner = await startRunner({
    handle,
    config,
    log: logger,
    serve: { host: config.shim.host, port: config.runner.metricsPort },
    topology,
  });
  started.push(() => runner.stop());
  // The shim gets its own connection: on the embedded engine one connection runs one
  // query at a time and per-query settings outlive the query (see docs/embedded.md).
  const shim = await startDemoShim(config, logger);

  const base = shim.url;
  const service = DEMO_PRESSURE_SERVICES[0]?.service ?? 'demo-ingest';
  process.stdout.write(
    [
      '',
      `dfe-keda-shim demo: ${handle.target}, hunts from ${config.runner.huntsDir}, claims: ${runner.claimMode() ?? 'unresolved'}`,
      '',
      `  curl ${base}/keda/hunt-backlog             # due hunts (KEDA AverageValue signal)`,
      `  curl '${base}/keda/pressure?service=${service}&hold=70'   # scaling pressure (Value signal)`,
      `  curl ${base}/q/backlog                     # any catalogue query by name`,
      `  curl ${base}/status                        # per-query value, age, last error`,
      `  curl ${base}/metrics                       # Prometheus metrics of the shim`,
      `  curl ${runner.metricsUrl ?? ''}/metrics    # Prometheus metrics of the hunt runner`,
      ...(shim.grpc === undefined
        ? []
        : [
            '',
            `  gRPC ${shim.grpc.address}: KEDA's external scaler (triggers external / external-push), e.g.`,
            `  grpcurl -plaintext -proto proto/externalscaler.proto -d '{"scaledObjectRef":{"name":"demo","namespace":"demo","scalerMetadata":{"query":"backlog"}},"metricName":"backlog"}' ${shim.grpc.address} externalscaler.ExternalScaler/GetMetrics`,
          ]),
      '',
      'Ctrl-C stops it. Every 10 s a line shows the due backlog, the hunt runs and what they found',
      '(two minutes of past events were loaded at start, so the first runs already find attacks).',
      '',
    ].join('\n'),
  );
  const ticker = startTicker(handle.client, ch.dataDatabase, runner.metrics.runs);

  let closed: Promise<void> | undefined;
  const close = async () => {
    clearInterval(ticker);
    await shim.close();
    await runner.stop();
    await Promise.all([events.stop(), pressure.stop()]);
    await handle.close();
  };
  return { logger, close: () => (closed ??= close()) };
}

/**
 * Prints the backlog (the same SQL KEDA reads), the runs of this runner by outcome (its
 * dfe_hunt_runs_total) and the detections so far, so the demo shows the system working.
 */
function startTicker(client: ClickHouseClient, database: string, runs: RunnerMetrics['runs']): NodeJS.Timeout {
  const read = async (query: string): Promise<string> => {
    const rs = await client.query({ query, format: 'JSONEachRow' });
    const [row] = await rs.json<{ value: string | number }>();
    return String(row?.value ?? 0);
  };
  const runCounts = async (): Promise<string> => {
    const counted = { succeeded: 0, failed: 0 };
    for (const { labels, value } of (await runs.get()).values) {
      if (labels.outcome === 'succeeded' || labels.outcome === 'failed') counted[labels.outcome] += value;
    }
    return `${counted.succeeded} succeeded, ${counted.failed} failed`;
  };
  const timer = setInterval(() => {
    Promise.all([read(dueCountSql(database)), runCounts(), read(`SELECT count() AS value FROM \`${database}\`.detections`)])
      .then(([backlog, runsLine, detections]) =>
        process.stdout.write(`${new Date().toISOString()} due hunts: ${backlog}, runs: ${runsLine}, detections so far: ${detections}\n`),
      )
      .catch(() => undefined);
  }, 10_000);
  timer.unref();
  return timer;
}
