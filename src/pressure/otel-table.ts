import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../clickhouse/identifiers.js';

/**
 * The OpenTelemetry Collector ClickHouse exporter's gauge table, as the exporter
 * creates it (columns, types, engine, partitioning, sorting key, skip indexes).
 * Used by tests and the embedded demo so the pressure SQL runs against the
 * real shape, Map and Nested columns included. In production the exporter
 * creates and owns this table; the shim only reads it.
 *
 * Column codecs are left out: they change storage, never query results.
 */
export const OTEL_GAUGE_TABLE = 'otel_metrics_gauge';

export function otelGaugeTableDdl(database: string, table = OTEL_GAUGE_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, table)} (
    ResourceAttributes Map(LowCardinality(String), String),
    ResourceSchemaUrl String,
    ScopeName String,
    ScopeVersion String,
    ScopeAttributes Map(LowCardinality(String), String),
    ScopeDroppedAttrCount UInt32,
    ScopeSchemaUrl String,
    ServiceName LowCardinality(String),
    MetricName String,
    MetricDescription String,
    MetricUnit String,
    Attributes Map(LowCardinality(String), String),
    StartTimeUnix DateTime64(9),
    TimeUnix DateTime64(9),
    Value Float64,
    Flags UInt32,
    Exemplars Nested (
        FilteredAttributes Map(LowCardinality(String), String),
        TimeUnix DateTime64(9),
        Value Float64,
        SpanId String,
        TraceId String
    ),
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_key mapKeys(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_value mapValues(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_attr_key mapKeys(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_attr_value mapValues(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toDate(TimeUnix)
ORDER BY (ServiceName, MetricName, Attributes, toUnixTimestamp64Nano(TimeUnix))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1`;
}

/** One gauge data point as the exporter stores it (the columns the pressure rule reads). */
export interface GaugePoint {
  /** `resource['service.name']`, or the scrape job. */
  readonly serviceName: string;
  readonly metricName: string;
  /** May be negative or non-finite: the rule must cope with what apps really send. */
  readonly value: number;
  /** Data point time, epoch nanoseconds. */
  readonly timeUnixNs: bigint;
  readonly resourceAttributes?: Readonly<Record<string, string>>;
  readonly attributes?: Readonly<Record<string, string>>;
  /** Bit 1 = no recorded value (a Prometheus staleness marker). Default 0. */
  readonly flags?: number;
}

/** Epoch nanoseconds as `seconds.nanoseconds`, which DateTime64(9) parses exactly. */
function dateTime64Text(ns: bigint): string {
  const seconds = ns / 1_000_000_000n;
  const fraction = (ns % 1_000_000_000n).toString().padStart(9, '0');
  return `${seconds}.${fraction}`;
}

/** JSON has no NaN or ±Inf; ClickHouse reads them from these strings. */
function float64Json(value: number): number | string {
  if (Number.isFinite(value)) return value;
  if (Number.isNaN(value)) return 'nan';
  return value > 0 ? 'inf' : '-inf';
}

/** A JSONEachRow row for the gauge table. */
export function gaugeRow(point: GaugePoint): Record<string, unknown> {
  const time = dateTime64Text(point.timeUnixNs);
  return {
    ResourceAttributes: { 'service.name': point.serviceName, ...point.resourceAttributes },
    ServiceName: point.serviceName,
    MetricName: point.metricName,
    Attributes: point.attributes ?? {},
    StartTimeUnix: time,
    TimeUnix: time,
    Value: float64Json(point.value),
    Flags: point.flags ?? 0,
  };
}

export async function insertGaugePoints(
  client: ClickHouseClient,
  database: string,
  points: readonly GaugePoint[],
  table = OTEL_GAUGE_TABLE,
): Promise<void> {
  if (points.length === 0) return;
  await client.insert({ table: qualifiedTable(database, table), values: points.map(gaugeRow), format: 'JSONEachRow' });
}

/** Creates the gauge table if it is missing (idempotent). */
export async function createOtelGaugeTable(client: ClickHouseClient, database: string, table = OTEL_GAUGE_TABLE): Promise<void> {
  await client.command({ query: otelGaugeTableDdl(database, table) });
}
