import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { CatalogueStore } from '../../src/catalogue/store.js';
import type { ClickHouseHandle } from '../../src/clickhouse/client.js';
import { qualifiedTable } from '../../src/clickhouse/identifiers.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { applySchema } from '../../src/coordination/topology.js';
import { createOtelGaugeTable, insertGaugePoints, OTEL_GAUGE_TABLE } from '../../src/pressure/otel-table.js';
import { PRESSURE_MAX } from '../../src/pressure/rule.js';
import { buildShimApp } from '../../src/shim/app.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { blackHoleServer, refusedPort, type FaultEndpoint } from '../helpers/faults.js';
import { readMetricsApi, type FetchMetric } from '../helpers/keda-model.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

/**
 * The world the KEDA/HPA model scales: a real engine holding the OTel gauge
 * table and the hunt coordination tables, and the real shim serving the real
 * built-in catalogue over a loopback socket.
 */
export type Link = 'up' | 'refused' | 'black-hole';

/**
 * The shim's ClickHouse "network": the real embedded engine while up; during
 * an outage, a real server-backend client (built as production builds it)
 * pointed at a loopback port that refuses connections or never answers. The
 * executor reads `client` at every query start, so flipping the link is the
 * network going down under a running shim whose last-good cache stays put.
 */
export class ClickHouseLink {
  link: Link = 'up';
  readonly backend = 'embedded' as const;
  readonly target: string;
  /** The engine's (a drain on the embedded engine), read with `client` when a query starts. */
  readonly afterQueryError: ClickHouseHandle['afterQueryError'];

  constructor(
    private readonly engine: ClickHouseHandle,
    private readonly refused: Pick<ClickHouseHandle, 'client' | 'close'>,
    private readonly blackHole: Pick<ClickHouseHandle, 'client' | 'close'>,
  ) {
    this.target = engine.target;
    this.afterQueryError = engine.afterQueryError;
  }

  get client(): ClickHouseClient {
    if (this.link === 'refused') return this.refused.client;
    if (this.link === 'black-hole') return this.blackHole.client;
    return this.engine.client;
  }

  /** Closes the outage clients (the engine belongs to the test database). */
  async closeOutageClients(): Promise<void> {
    await this.refused.close();
    await this.blackHole.close();
  }
}

export interface World {
  readonly db: TestDatabase;
  /** The shim's clock; runs move it with virtual time. */
  readonly clock: ManualClock;
  /** The shim's ClickHouse link: `up`, `refused` or `black-hole`. */
  readonly network: ClickHouseLink;
  readonly shimUrl: string;
  /** Connections that reached the never-answering endpoint. */
  blackHoleHits(): number;
  /** Replaces the window with one point per pod: `load / replicas` (a service whose work spreads over its pods). */
  publishPressure(service: string, load: number, replicas: number): Promise<void>;
  /** Makes `count` hunts due (and no more). */
  setBacklog(count: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * A server-backend client at a dead endpoint. Its request timeout
 * (DFE_CLICKHOUSE_REQUEST_TIMEOUT_MS in production) is short so a black-holed
 * query fails fast instead of lingering in flight; its console logger is off
 * (the shim logs failures itself).
 */
function serverClientAt(endpoint: FaultEndpoint): Pick<ClickHouseHandle, 'client' | 'close'> {
  const client = createClient({ url: endpoint.url, request_timeout: 300, log: { level: ClickHouseLogLevel.OFF } });
  return { client, close: () => client.close() };
}

export async function openWorld(): Promise<World> {
  const clock = new ManualClock(Date.now());
  const db = await openTestDatabase('model');
  const client = db.handle.client;
  await createOtelGaugeTable(client, db.database);
  await applySchema(client, db.database, { kind: 'single' });
  const refused = await refusedPort();
  const hole = await blackHoleServer();
  const network = new ClickHouseLink(db.handle, serverClientAt(refused), serverClientAt(hole));
  // The built-in catalogue exactly as shipped (queries/queries.yaml), no override.
  const catalogue = await CatalogueStore.open({ dataDatabase: db.database, otelDatabase: db.database, builtins: SHIM_CATALOGUE_BUILTINS, clock });
  const app: FastifyInstance = await buildShimApp({
    catalogue,
    clickhouse: network,
    config: { shim: loadConfig({}).shim },
    clock,
    registry: new Registry(),
  });
  const shimUrl = await app.listen({ host: '127.0.0.1', port: 0 });
  let hunts = 0;

  return {
    db,
    clock,
    network,
    shimUrl,
    blackHoleHits: () => hole.hits(),
    async publishPressure(service, load, replicas) {
      await client.command({ query: `TRUNCATE TABLE ${qualifiedTable(db.database, OTEL_GAUGE_TABLE)}` });
      const [row] = await queryRows<{ ns: string }>(db, 'SELECT toString(toUnixTimestamp64Nano(now64(9))) AS ns');
      const timeUnixNs = BigInt(row!.ns);
      const perPod = Math.min(PRESSURE_MAX, load / replicas);
      const points = Array.from({ length: replicas }, (_, i) => ({
        serviceName: service,
        metricName: 'shop_scaling_pressure',
        value: perPod,
        timeUnixNs,
        resourceAttributes: { 'service.instance.id': `${service}-${i}` },
      }));
      await insertGaugePoints(client, db.database, points);
    },
    async setBacklog(count) {
      // Schedule rows without a watermark or lease are due (docs/schedule.md#due).
      const values = [];
      for (; hunts < count; hunts++) values.push({ hunt_id: `hunt-${hunts}`, interval_seconds: 60, phase_offset: 0 });
      if (values.length > 0) await client.insert({ table: qualifiedTable(db.database, 'hunt_schedule'), values, format: 'JSONEachRow' });
    },
    async close() {
      await app.close();
      await network.closeOutageClients();
      await refused.close();
      await hole.close();
      await db.close();
    },
  };
}

export interface ShimAnswer {
  readonly atSeconds: number;
  readonly status: number;
  readonly source: string | undefined;
  readonly value: number | undefined;
}

/**
 * KEDA's side of the wire: a plain GET of the trigger URL over real HTTP, read
 * as the metrics-api scaler reads it. The shim's clock follows virtual time so
 * ages it reports are virtual seconds. Every answer is kept for assertions.
 */
export function kedaFetch(url: string, clock: ManualClock, answers: ShimAnswer[], beforeRequest?: (t: number) => Promise<void>): FetchMetric {
  // Virtual time 0 is now on the shim's clock; time only moves forward across runs.
  const startMs = clock.nowMs() + 1000;
  return async (atSeconds) => {
    clock.set(startMs + atSeconds * 1000);
    await beforeRequest?.(atSeconds);
    const res = await fetch(url);
    const text = await res.text();
    let body: { source?: string; value?: number } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      // KEDA reads it as an error; readMetricsApi says so.
    }
    answers.push({ atSeconds, status: res.status, source: body.source, value: body.value });
    return readMetricsApi(res.status, text);
  };
}
