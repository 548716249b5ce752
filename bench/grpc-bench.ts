import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { externalScalerService } from '../src/shim/grpc/proto.js';
import { Coordinator } from '../src/coordination/coordinator.js';
import { materialise } from '../src/coordination/materialise.js';
import { applySchema, coordinationSettings } from '../src/coordination/topology.js';
import { latestFire } from '../src/schedule/arithmetic.js';
import { compileHuntFile } from '../src/schedule/hunt-spec.js';
import { freePort } from '../test/helpers/ports.js';
import { scalerClient } from '../test/helpers/grpc-client.js';
import { runLoad, type LoadResult } from './load.js';
import { goal, int, mb, median, ms, percentile, type BenchLine } from './report.js';
import { startBenchShim, type BenchShim } from './servers.js';

/**
 * KEDA's external scaler protocol (docs/api.md#grpc): how soon a run-now
 * request reaches an open StreamIsActive stream, GetMetrics on a cached value
 * beside the HTTP cached path in the same run, and what 1 000 open streams
 * cost in ClickHouse queries and memory. Embedded engine, loopback, the shim
 * as startShim starts it with the production check interval (1 s).
 */
const TRIALS = 20;
/** The production default of DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS. */
const CHECK_INTERVAL_MS = 1_000;
const KEDA_POLLING_INTERVAL_S = 30;
const LOAD_ROUNDS = 5;
const LOAD_SECONDS = 3;
const CONCURRENCY = 10;
const STREAMS = 1_000;
const STREAM_CHANNELS = 10;
const STREAM_KEYS = 10;
const STREAM_MEASURE_S = 10;
const SETTINGS = coordinationSettings({ kind: 'single' });
const CLIENTS = new URL('./grpc-clients.js', import.meta.url);

const sleep = (msToWait: number) => new Promise((resolve) => setTimeout(resolve, msToWait));

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

async function grpcShim(embedded: ClickHouseHandle, database: string, override: string): Promise<BenchShim & { address: string }> {
  const shim = await startBenchShim(override, embedded, {
    DFE_CLICKHOUSE_DATA_DATABASE: database,
    DFE_KEDA_SHIM_GRPC_PORT: String(await freePort()),
  });
  const address = shim.shim.grpc?.address;
  if (address === undefined) throw new Error('the shim started without its gRPC port');
  return { ...shim, address };
}

/** run-now → StreamIsActive true, p50/p99 of TRIALS, against metrics-api's expected wait at KEDA's default pollingInterval. */
export async function benchRunNowPush(embedded: ClickHouseHandle): Promise<BenchLine[]> {
  const database = 'bench_grpc_push';
  const c = embedded.client;
  await c.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` });
  await applySchema(c, database, { kind: 'single' });
  const compiled = compileHuntFile('/h/nightly.yaml', 'schedule: {mode: rate, interval: 86400}\nqueries: [SELECT 1]\n', 0.8);
  if (compiled.kind !== 'hunt') throw new Error('bench hunt does not compile');
  await materialise(c, database, [compiled.spec], SETTINGS);
  const coordinator = new Coordinator(c, database, SETTINGS);
  const serverNow = async () => {
    const rows = await (await c.query({ query: 'SELECT toInt64(toUnixTimestamp(now())) AS now', format: 'JSONEachRow' })).json<{ now: number }>();
    return Number(rows[0]?.now);
  };
  let covered = latestFire(await serverNow(), 86400, compiled.spec.phaseOffset);
  await coordinator.setWatermark('nightly', covered);
  const shim = await grpcShim(embedded, database, 'queries: {}\n');
  const client = scalerClient(shim.address);
  const stream = client.streamIsActive({ query: 'backlog' });
  const latencies: number[] = [];
  try {
    await until(() => stream.messages.at(-1) === false, 'the first state');
    for (let trial = 0; trial < TRIALS; trial++) {
      // A new request needs a fire above the watermark that covered the last one.
      await until(async () => (await serverNow()) > covered, 'the ClickHouse clock to pass the last fire');
      // A request lands at a random point of the check cycle, as a real one does (the wait for
      // `false` above ends just after a check, which would make every trial the worst case).
      await sleep(Math.random() * CHECK_INTERVAL_MS);
      const before = stream.messages.length;
      const started = performance.now();
      covered = await coordinator.requestRun('nightly');
      await until(() => stream.messages.length > before && stream.messages.at(-1) === true, 'the stream to turn true');
      latencies.push(performance.now() - started);
      // What a run that serves the request writes; the stream turns false again.
      await coordinator.setWatermark('nightly', covered);
      await until(() => stream.messages.at(-1) === false, 'the stream to turn false');
    }
  } finally {
    stream.cancel();
    client.close();
    await shim.close();
    await c.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  }
  const p99 = percentile(latencies, 99);
  return [
    {
      kind: 'figure',
      name: `grpc, run-now → StreamIsActive true (${TRIALS} trials, check every 1 s, embedded engine)`,
      measured: `p50 ${ms(percentile(latencies, 50))}, p99 ${ms(p99)}, max ${ms(Math.max(...latencies))}`,
      baseline: `metrics-api at KEDA's default pollingInterval ${KEDA_POLLING_INTERVAL_S} s: ${KEDA_POLLING_INTERVAL_S / 2} s expected, ${KEDA_POLLING_INTERVAL_S} s worst (the next poll; computed)`,
      goal: 'p99 ≤ 2 s',
      outcome: goal(p99 <= 2_000),
    },
  ];
}

function grpcLoad(address: string, metadata: Record<string, string>, client: 'wire' | 'grpc-js' = 'wire'): Promise<{ calls: number; errors: number; rps: number }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(CLIENTS, { workerData: { kind: 'load', client, address, metadata, concurrency: CONCURRENCY, seconds: LOAD_SECONDS } });
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

/** The gRPC baseline: a bare @grpc/grpc-js server answering GetMetrics with a constant (what the library alone costs). */
async function startBareGrpc(): Promise<{ address: string; close(): void }> {
  const server = new Server();
  server.addService(externalScalerService(), {
    GetMetrics: (_call: unknown, callback: (err: null, value: unknown) => void) =>
      callback(null, { metricValues: [{ metricName: 'm', metricValue: 42, metricValueFloat: 42 }] }),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return { address: `127.0.0.1:${port}`, close: () => server.forceShutdown() };
}

/** GetMetrics on a cached value against GET /q/<name> on the same cached value, same shim, interleaved rounds. */
export async function benchGrpcCached(embedded: ClickHouseHandle): Promise<BenchLine[]> {
  const shim = await grpcShim(embedded, 'default', 'queries:\n  cached:\n    database: default\n    sql: "SELECT 42 AS value"\n    fresh_for_seconds: 86400\n');
  const url = `${shim.url}/q/cached`;
  const metadata = { query: 'cached', targetValue: '10' };
  const bare = await startBareGrpc();
  try {
    await runLoad(url, { connections: CONCURRENCY, durationSeconds: 1 });
    await grpcLoad(shim.address, metadata);
    const http: LoadResult[] = [];
    const grpc: { rps: number; errors: number }[] = [];
    const bareRuns: { rps: number }[] = [];
    for (let round = 0; round < LOAD_ROUNDS; round++) {
      http.push(await runLoad(url, { connections: CONCURRENCY, durationSeconds: LOAD_SECONDS }));
      grpc.push(await grpcLoad(shim.address, metadata));
      bareRuns.push(await grpcLoad(bare.address, metadata));
    }
    const ratio = median(grpc.map((g, i) => g.rps / (http[i]?.rps ?? Number.NaN)));
    const bareRatio = median(grpc.map((g, i) => g.rps / (bareRuns[i]?.rps ?? Number.NaN)));
    const grpcJs = await grpcLoad(shim.address, metadata, 'grpc-js');
    const errors = grpc.reduce((n, g) => n + g.errors, 0) + http.reduce((n, h) => n + h.non2xx + h.errors, 0);
    return [
      {
        kind: 'figure',
        name: `grpc, GetMetrics on a cached value (${CONCURRENCY} in flight on one HTTP/2 connection, gRPC framing from Node's http2 client, ${LOAD_ROUNDS} interleaved pairs × ${LOAD_SECONDS} s, median of the pair ratios; clients in a worker thread)`,
        measured:
          `${int(median(grpc.map((g) => g.rps)))} calls/s (${ratio.toFixed(2)}×; runs ${grpc.map((g) => int(g.rps)).join(', ')}), ${errors} errors; ` +
          `${bareRatio.toFixed(2)}× a bare @grpc/grpc-js server answering a constant (${int(median(bareRuns.map((b) => b.rps)))} calls/s); ` +
          `through the @grpc/grpc-js client: ${int(grpcJs.rps)} calls/s (the client's own ceiling)`,
        baseline: `HTTP GET of the same cached value, same shim (autocannon, ${CONCURRENCY} connections): ${int(median(http.map((h) => h.rps)))} req/s (runs ${http.map((h) => int(h.rps)).join(', ')})`,
        goal: '≥ 0.8× throughput, no errors',
        outcome: goal(ratio >= 0.8 && errors === 0),
      },
    ];
  } finally {
    bare.close();
    await shim.close();
  }
}

/** 1 000 open streams over STREAM_KEYS distinct params: ClickHouse queries per second and the shim process's RSS growth. */
export async function benchOpenStreams(embedded: ClickHouseHandle): Promise<BenchLine[]> {
  const shim = await grpcShim(embedded, 'default', 'queries:\n  keyed:\n    database: default\n    params: [key]\n    sql: "SELECT length({key:String}) - 2 AS value"\n');
  const hub = shim.shim.grpc!.streams;
  global.gc?.();
  await sleep(1_000);
  const rss0 = process.memoryUsage().rss;
  // The clients live in another process, so this process's RSS is the shim's (and the engine's).
  const child = spawn(process.execPath, [CLIENTS.pathname, 'streams', shim.address, String(STREAMS), String(STREAM_CHANNELS), String(STREAM_KEYS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await until(() => out.includes('open') && hub.size === STREAMS, `${STREAMS} streams open`, 120_000);
    const q0 = shim.queriesStarted();
    const t0 = performance.now();
    await sleep(STREAM_MEASURE_S * 1000);
    const perSecond = (shim.queriesStarted() - q0) / ((performance.now() - t0) / 1000);
    const rss = process.memoryUsage().rss;
    child.kill('SIGTERM');
    await until(() => hub.size === 0, 'the streams to be freed');
    const bound = STREAM_KEYS * 1.1;
    return [
      {
        kind: 'figure',
        name: `grpc, ${int(STREAMS)} open StreamIsActive streams (${STREAM_KEYS} distinct params, ${STREAM_CHANNELS} client channels in another process, ${STREAM_MEASURE_S} s, check every 1 s)`,
        measured: `${perSecond.toFixed(1)} ClickHouse queries/s; shim process RSS +${mb(rss - rss0)} (${mb(rss)} in all); freed to ${hub.size} on disconnect`,
        baseline: `one query per distinct params per check: ${STREAM_KEYS}/s; per stream: ${(perSecond / STREAMS).toFixed(3)}/s`,
        goal: `≤ ${bound.toFixed(0)} queries/s (not ${int(STREAMS)}), all freed`,
        outcome: goal(perSecond <= bound && hub.size === 0),
      },
    ];
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await shim.close();
  }
}
