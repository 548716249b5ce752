/**
 * The scaling-pressure matching rule (SPEC §6), owned here and substituted into
 * every catalogue through the `__PRESSURE_MATCH__` and `__PRESSURE_NAME__`
 * sentinels. (Stub: the pressure issue fills in and tests the full rule.)
 */
export const PRESSURE_METRIC = 'scaling_pressure';

/** SQL boolean: MetricName is `scaling_pressure` or `<prefix>_scaling_pressure`. */
export function pressureMatchSql(column = 'MetricName'): string {
  return `(${column} = '${PRESSURE_METRIC}' OR endsWith(${column}, '_${PRESSURE_METRIC}'))`;
}

/** SQL string literal of the bare metric name. */
export function pressureNameSql(): string {
  return `'${PRESSURE_METRIC}'`;
}
