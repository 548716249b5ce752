import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import { RUN_STATUS, TABLES } from '../../coordination/tables.js';
import { costFromRuns } from '../cost.js';
import type { HuntCost } from '../model.js';

/**
 * The cost model's I/O (docs/smoothing.md, "Where costs come from"): per hunt,
 * over the trailing cost window, the p95 of a run's duration, CPU and peak
 * memory. Source: `system.query_log` (rows whose log_comment JSON says
 * kind = hunt; one run = the statements of one fire) where the runner's user
 * can read it, probed once; otherwise hunt_run's cost columns, which the runner
 * writes for every finished run. The embedded engine keeps no query_log, so it
 * always uses hunt_run. On a cluster, query_log is per node: the probe reads the
 * node the runner talks to.
 */
export type CostSource = 'query_log' | 'hunt_run';

/** Reads query_log once with LIMIT 0: any error (no table, no grant) means hunt_run. */
export async function probeCostSource(client: ClickHouseClient): Promise<CostSource> {
  try {
    await client.query({ query: 'SELECT log_comment, query_duration_ms, memory_usage, ProfileEvents FROM system.query_log LIMIT 0', format: 'JSONEachRow' }).then((rs) => rs.json());
    return 'query_log';
  } catch {
    return 'hunt_run';
  }
}

/**
 * Nearest-rank p95 in SQL, the same definition as the core's p95() (cost.ts): the
 * ceil(0.95·n)-th smallest value (ClickHouse arrays are 1-based).
 */
function p95Sql(expr: string): string {
  return `arrayElement(arraySort(groupArray(${expr})), toUInt64(ceil(0.95 * count())))`;
}

/** Missing CPU (0) is the run's duration × one core, per run, as cost.ts's runCpuUs. */
const CPU_OR_DURATION = (cpu: string, durationMs: string) => `if(${cpu} > 0, ${cpu}, ${durationMs} * 1000)`;

type Raw = { hunt_id: string; d: number | string; c: number | string; m: number | string; n: number | string };

const QUERY_LOG_SQL = `
SELECT id AS hunt_id, ${p95Sql('dur')} AS d, ${p95Sql(CPU_OR_DURATION('cpu', 'dur'))} AS c, ${p95Sql('mem')} AS m, count() AS n
FROM (
  SELECT JSONExtractString(log_comment, 'id') AS id, JSONExtractInt(log_comment, 'fire') AS fire,
    sum(query_duration_ms) AS dur,
    sum(ProfileEvents['UserTimeMicroseconds'] + ProfileEvents['SystemTimeMicroseconds']) AS cpu,
    max(memory_usage) AS mem
  FROM system.query_log
  WHERE event_time >= now() - toIntervalSecond({window:Int64})
    AND type IN ('QueryFinish', 'ExceptionWhileProcessing')
    AND log_comment LIKE '%"kind":"hunt"%' AND JSONExtractString(log_comment, 'kind') = 'hunt'
  GROUP BY id, fire
)
GROUP BY id`;

function huntRunSql(database: string, oneHunt: boolean): string {
  // duration_ms = 0: a row written before the cost columns existed (or a run-now request): no sample.
  return `
SELECT hunt_id, ${p95Sql('duration_ms')} AS d, ${p95Sql(CPU_OR_DURATION('cpu_us', 'duration_ms'))} AS c,
  ${p95Sql('memory_bytes')} AS m, count() AS n
FROM ${qualifiedTable(database, TABLES.run)}
WHERE status IN ('${RUN_STATUS.succeeded}', '${RUN_STATUS.failed}') AND duration_ms > 0
  AND updated >= now64(3) - toIntervalSecond({window:Int64})${oneHunt ? ' AND hunt_id = {hunt:String}' : ''}
GROUP BY hunt_id`;
}

export interface MeasuredCosts {
  readonly source: CostSource;
  /** p95 per hunt with runs in the window (missing CPU already taken as duration × 1 core). */
  readonly costs: ReadonlyMap<string, HuntCost>;
  /** Runs per hunt in the window. */
  readonly runs: ReadonlyMap<string, number>;
}

export async function readCosts(
  client: ClickHouseClient,
  database: string,
  settings: CoordinationSettings,
  source: CostSource,
  windowSeconds: number,
  huntId?: string,
): Promise<MeasuredCosts> {
  // One hunt (the escalation check after a run) reads hunt_run, which the runner just wrote.
  const query = huntId !== undefined ? huntRunSql(database, true) : source === 'query_log' ? QUERY_LOG_SQL : huntRunSql(database, false);
  const rs = await client.query({
    query,
    query_params: huntId !== undefined ? { window: windowSeconds, hunt: huntId } : { window: windowSeconds },
    format: 'JSONEachRow',
    clickhouse_settings: settings.read,
  });
  const costs = new Map<string, HuntCost>();
  const runs = new Map<string, number>();
  for (const r of await rs.json<Raw>()) {
    // The p95s go through the core's arithmetic as one sample: its rules (missing CPU) apply once, here.
    const cost = costFromRuns([{ durationMs: Number(r.d), cpuUs: Number(r.c), memoryBytes: Number(r.m) }]);
    if (cost) costs.set(r.hunt_id, cost);
    runs.set(r.hunt_id, Number(r.n));
  }
  return { source, costs, runs };
}
