import { OTEL_GAUGE_TABLE } from './otel-table.js';

/**
 * The scaling-pressure rule (docs/pressure.md#the-rule), defined once. Every catalogue that reads
 * pressure (the shim's built-in `pressure` query, and any other reader's)
 * substitutes `__PRESSURE_MATCH__` / `__PRESSURE_NAME__` from here, and the
 * built-in query's SQL is `PRESSURE_SQL_TEMPLATE` verbatim (a test holds
 * queries/queries.yaml to it), so the autoscaler and any console count the
 * same rows the same way.
 */
export const PRESSURE_METRIC = 'scaling_pressure';

/** Default look-back of the built-in query (`binds: {window_seconds: 60}`). */
export const PRESSURE_WINDOW_SECONDS = 60;

/** The gauge's band: apps emit 0–100; anything outside is clamped into it, per data point. */
export const PRESSURE_MIN = 0;
export const PRESSURE_MAX = 100;

/**
 * SQL boolean: MetricName is `scaling_pressure` or `<prefix>_scaling_pressure`.
 * `xscaling_pressure` (no `_` joint) and `scaling_pressure_total` do not match.
 */
export function pressureMatchSql(column = 'MetricName'): string {
  return `(${column} = '${PRESSURE_METRIC}' OR endsWith(${column}, '_${PRESSURE_METRIC}'))`;
}

/** SQL string literal of the bare metric name. */
export function pressureNameSql(): string {
  return `'${PRESSURE_METRIC}'`;
}

/**
 * The pressure query, with the catalogue's sentinels left in (`__DB__`,
 * `__PRESSURE_MATCH__`) and values as bound parameters (`service`,
 * `window_seconds`). Why each clause is there:
 *
 * - `ServiceName` first: it leads the exporter's sorting key.
 * - A series is metric name + attribute set + pod. An OTLP push names the pod in
 *   `ResourceAttributes['service.instance.id']`; a Prometheus scrape puts the
 *   instance there and the pod label in `Attributes`. A missing key reads as '',
 *   so rows naming no pod share one series. `mapSort` because Map equality is
 *   order-sensitive and an exporter may write the same labels in another order.
 * - `Flags` bit 1 marks a Prometheus staleness marker (Value 0, not a reading).
 * - Non-finite points are dropped and every point is clamped into 0–100 as
 *   Float64 before averaging, so a negative can never wrap into a huge unsigned
 *   number and one wild point cannot dominate a pod's average.
 * - Average per series, then MAX across series: the hottest pod sets the value
 *   (averaging pods together would report a busy pod and an idle one as lukewarm).
 * - No matching rows → 0, a successful answer.
 * - No upper time bound: points stamped slightly in the future (pod clock skew)
 *   still count.
 */
export const PRESSURE_SQL_TEMPLATE = `SELECT ifNull(maxOrNull(series_pressure), 0.0) AS pressure
FROM (
  SELECT avg(least(greatest(Value, 0.0), 100.0)) AS series_pressure
  FROM __DB__.${OTEL_GAUGE_TABLE}
  WHERE ServiceName = {service:String}
    AND __PRESSURE_MATCH__
    AND TimeUnix >= now64(9) - toIntervalSecond({window_seconds:UInt32})
    AND bitAnd(Flags, 1) = 0
    AND isFinite(Value)
  GROUP BY MetricName, mapSort(Attributes), ResourceAttributes['service.instance.id']
)`;

/**
 * The same rule for many services in one query (the built-in query's `batch:`,
 * docs/catalogue.md#batch): the services as one bound `Array(String)`, one row
 * `(service, pressure)` per service that has matching rows. A service with none
 * has no row, and the shim answers it as the one-by-one query's no-rows answer (0).
 * Per service it is PRESSURE_SQL_TEMPLATE: the same filters, series and reduction.
 */
export const PRESSURE_BATCH_SQL_TEMPLATE = `SELECT service, ifNull(maxOrNull(series_pressure), 0.0) AS pressure
FROM (
  SELECT ServiceName AS service, avg(least(greatest(Value, 0.0), 100.0)) AS series_pressure
  FROM __DB__.${OTEL_GAUGE_TABLE}
  WHERE ServiceName IN {service:Array(String)}
    AND __PRESSURE_MATCH__
    AND TimeUnix >= now64(9) - toIntervalSecond({window_seconds:UInt32})
    AND bitAnd(Flags, 1) = 0
    AND isFinite(Value)
  GROUP BY ServiceName, MetricName, mapSort(Attributes), ResourceAttributes['service.instance.id']
)
GROUP BY service`;

/** Replaces the pressure sentinels (not `__DB__`) in any catalogue SQL. */
export function substitutePressureSentinels(sql: string): string {
  return sql.replaceAll('__PRESSURE_MATCH__', pressureMatchSql()).replaceAll('__PRESSURE_NAME__', pressureNameSql());
}

/**
 * The full pressure SQL for one database, exactly as the catalogue compiles it.
 * `quotedDatabase` must come from `quoteDatabase()`.
 */
export function renderPressureSql(quotedDatabase: string): string {
  return substitutePressureSentinels(PRESSURE_SQL_TEMPLATE.replaceAll('__DB__', quotedDatabase));
}

/** The full batch SQL for one database (`quotedDatabase` from `quoteDatabase()`). */
export function renderPressureBatchSql(quotedDatabase: string): string {
  return substitutePressureSentinels(PRESSURE_BATCH_SQL_TEMPLATE.replaceAll('__DB__', quotedDatabase));
}

/** The query parameters the catalogue binds for a pressure request. */
export function pressureQueryParams(service: string, windowSeconds = PRESSURE_WINDOW_SECONDS): Record<string, string | number> {
  return { service, window_seconds: windowSeconds };
}
