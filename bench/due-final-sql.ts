import { qualifiedTable } from '../src/clickhouse/identifiers.js';
import { RUN_STATUS, TABLES } from '../src/coordination/tables.js';

/**
 * The comparison baseline for the due-query bench ONLY: the same decision as
 * src/coordination/due-sql.ts written the obvious way, every table read with FINAL and
 * joined (the auto-disable filter written as the product writes it, so the two
 * differ only in shape). Issue 13 asks the product to be no slower than this; the
 * bench checks both count the same hunts before it compares their times. The
 * product differs on purpose: live leases as a set, and hunt_run without FINAL
 * (see docs/tables.md#the-due-query). `now: 'param'` binds `{now:Int64}`, so the
 * bench can compare the two counts at one clock reading.
 */
export function dueCountFinalSql(database: string, options: { readonly now?: 'server' | 'param' } = {}): string {
  const schedule = qualifiedTable(database, TABLES.schedule);
  const watermark = qualifiedTable(database, TABLES.watermark);
  const lease = qualifiedTable(database, TABLES.lease);
  const run = qualifiedTable(database, TABLES.run);
  const state = qualifiedTable(database, TABLES.state);
  const now = options.now === 'param' ? '{now:Int64}' : 'toInt64(toUnixTimestamp(now()))';
  return `
SELECT count() AS value FROM (
  SELECT
    s.hunt_id AS hunt_id,
    ${now} AS now_s,
    intDiv(now_s, s.interval_seconds) * s.interval_seconds + s.phase_offset AS current_fire,
    if(now_s >= current_fire, current_fire, current_fire - s.interval_seconds) AS sched_fire,
    (w.has_wm = 0 OR w.watermark < sched_fire) AS sched_owed,
    arrayFilter(f -> f <= now_s AND (w.has_wm = 0 OR f > w.watermark), r.req_fires) AS req_open,
    l.lease_until <= now_s AS lease_free
  FROM (
    SELECT hunt_id, interval_seconds, phase_offset
    FROM ${schedule} FINAL
    WHERE enabled = 1 AND interval_seconds > 0
      AND hunt_id NOT IN (SELECT hunt_id FROM ${state} FINAL WHERE disabled_reason != '')
  ) AS s
  LEFT JOIN (SELECT hunt_id, watermark, toUInt8(1) AS has_wm FROM ${watermark} FINAL) AS w ON w.hunt_id = s.hunt_id
  LEFT JOIN (SELECT hunt_id, lease_until FROM ${lease} FINAL) AS l ON l.hunt_id = s.hunt_id
  LEFT JOIN (
    SELECT hunt_id, groupArray(fire) AS req_fires
    FROM ${run} FINAL
    WHERE status = '${RUN_STATUS.requested}'
    GROUP BY hunt_id
  ) AS r ON r.hunt_id = s.hunt_id
)
WHERE lease_free AND (sched_owed OR length(req_open) > 0)`;
}
