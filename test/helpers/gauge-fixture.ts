import { quoteDatabase } from '../../src/clickhouse/identifiers.js';
import { createOtelGaugeTable, insertGaugePoints, type GaugePoint } from '../../src/pressure/otel-table.js';
import { pressureQueryParams, renderPressureSql } from '../../src/pressure/rule.js';
import { openTestDatabase, queryRows, type TestDatabase } from './clickhouse.js';

/**
 * A real engine with the exporter's gauge table, and writers that shape rows
 * the way the two real ingestion paths do. Times are relative to the engine's
 * own clock (it decides the window), read once per call.
 */
export interface GaugeFixture {
  readonly db: TestDatabase;
  /** Engine time now, epoch nanoseconds. */
  engineNowNs(): Promise<bigint>;
  write(points: readonly GaugePoint[]): Promise<void>;
  /** Runs the pressure SQL as the catalogue would: compiled text + bound params. */
  pressure(service: string, windowSeconds?: number): Promise<unknown>;
  close(): Promise<void>;
}

export async function openGaugeFixture(prefix = 'pressure'): Promise<GaugeFixture> {
  const db = await openTestDatabase(prefix);
  await createOtelGaugeTable(db.handle.client, db.database);
  const sql = renderPressureSql(quoteDatabase(db.database));
  return {
    db,
    async engineNowNs() {
      const [row] = await queryRows<{ ns: string }>(db, 'SELECT toString(toUnixTimestamp64Nano(now64(9))) AS ns');
      return BigInt(row!.ns);
    },
    write: (points) => insertGaugePoints(db.handle.client, db.database, points),
    async pressure(service, windowSeconds) {
      const rows = await queryRows<{ pressure: unknown }>(db, sql, pressureQueryParams(service, windowSeconds));
      if (rows.length !== 1) throw new Error(`pressure SQL returned ${rows.length} rows, expected exactly 1`);
      return rows[0]!.pressure;
    },
    close: () => db.close(),
  };
}

const NS_PER_SECOND = 1_000_000_000n;

/** A point `ageSeconds` before `nowNs`. */
export function agedNs(nowNs: bigint, ageSeconds: number): bigint {
  return nowNs - BigInt(Math.round(ageSeconds * 1000)) * (NS_PER_SECOND / 1000n);
}

/** What an OTLP push writes: service.name → ServiceName, the pod in service.instance.id. */
export function otlpPoint(
  service: string,
  pod: string | undefined,
  metricName: string,
  value: number,
  timeUnixNs: bigint,
  extra: { attributes?: Record<string, string>; flags?: number } = {},
): GaugePoint {
  return {
    serviceName: service,
    metricName,
    value,
    timeUnixNs,
    resourceAttributes: pod === undefined ? {} : { 'service.instance.id': pod, 'k8s.pod.name': pod },
    ...extra,
  };
}

/**
 * What the collector's Prometheus receiver writes for a scrape: ServiceName =
 * the `job`, service.instance.id = the `instance` (podIP:port), the series'
 * other labels (a relabelled `pod`) in Attributes; job/instance not repeated there.
 */
export function scrapePoint(
  job: string,
  instance: string,
  labels: Record<string, string>,
  metricName: string,
  value: number,
  timeUnixNs: bigint,
  flags = 0,
): GaugePoint {
  return {
    serviceName: job,
    metricName,
    value,
    timeUnixNs,
    resourceAttributes: { 'service.instance.id': instance, 'server.address': instance.split(':')[0] ?? instance },
    attributes: labels,
    flags,
  };
}
