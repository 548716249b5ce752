import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import { TABLES } from '../../coordination/tables.js';

/**
 * hunt_state writes of escalation (docs/smoothing.md): auto-disable, enable and
 * the interval back-off mark. Each write is a new row carrying every other
 * column of the newest row forward (like the overrun counter), so a disable
 * never resets the overrun count and an overrun never lifts a disable. An
 * aggregate over no rows yields one row of defaults, so a hunt without state
 * gets a first row the same way.
 */
export type DisableReason = 'mem_crashloop' | 'ceiling_memory' | 'ceiling_cpu' | 'ceiling_duration';

export interface DisabledHunt {
  readonly huntId: string;
  readonly reason: string;
  /** DateTime64(3) text as the server renders it. */
  readonly disabledAt: string;
}

type Patch = { readonly reason?: string; readonly stampDisabledAt?: boolean; readonly tooAggressive?: 0 | 1 };

function writeSettings(settings: CoordinationSettings) {
  // An embedded session may still carry a hunt's log_comment/dedup token (docs/embedded.md).
  return { ...settings.write, log_comment: '', insert_deduplication_token: '' };
}

async function writeState(client: ClickHouseClient, database: string, settings: CoordinationSettings, huntId: string, patch: Patch): Promise<void> {
  const state = qualifiedTable(database, TABLES.state);
  const reason = patch.reason === undefined ? 'reason' : '{reason:String}';
  const at = patch.stampDisabledAt ? 'now64(3)' : 'at';
  const aggressive = patch.tooAggressive === undefined ? 'aggressive' : '{aggressive:UInt8}';
  await client.command({
    query: `INSERT INTO ${state} (hunt_id, overrun_count, too_aggressive, disabled_reason, disabled_at)
      SELECT {hunt:String}, n, ${aggressive}, ${reason}, ${at} FROM (
        SELECT argMax(overrun_count, updated) AS n, argMax(too_aggressive, updated) AS aggressive,
               argMax(disabled_reason, updated) AS reason, argMax(disabled_at, updated) AS at
        FROM ${state} WHERE hunt_id = {hunt:String})`,
    query_params: { hunt: huntId, reason: patch.reason ?? '', aggressive: patch.tooAggressive ?? 0 },
    clickhouse_settings: writeSettings(settings),
  });
}

/** Disables a hunt: the due SQL skips it from the next tick; only `enable` lifts it. */
export function disableHunt(client: ClickHouseClient, database: string, settings: CoordinationSettings, huntId: string, reason: DisableReason) {
  return writeState(client, database, settings, huntId, { reason, stampDisabledAt: true });
}

/**
 * Lifts a disable. disabled_at is stamped again: failures before it no longer
 * count towards the next crash-loop (docs/smoothing.md).
 */
export function enableHunt(client: ClickHouseClient, database: string, settings: CoordinationSettings, huntId: string) {
  return writeState(client, database, settings, huntId, { reason: '', stampDisabledAt: true });
}

/** Marks (1) or clears (0) an interval back-off, which materialise then keeps. */
export function markBackoff(client: ClickHouseClient, database: string, settings: CoordinationSettings, huntId: string, on: 0 | 1) {
  return writeState(client, database, settings, huntId, { tooAggressive: on });
}

export async function readDisabled(client: ClickHouseClient, database: string, settings: CoordinationSettings): Promise<DisabledHunt[]> {
  const rs = await client.query({
    query: `SELECT hunt_id, reason, toString(at) AS at FROM (
        SELECT hunt_id, argMax(disabled_reason, updated) AS reason, argMax(disabled_at, updated) AS at
        FROM ${qualifiedTable(database, TABLES.state)} GROUP BY hunt_id)
      WHERE reason != '' ORDER BY hunt_id`,
    format: 'JSONEachRow',
    clickhouse_settings: settings.read,
  });
  return (await rs.json<{ hunt_id: string; reason: string; at: string }>()).map((r) => ({ huntId: r.hunt_id, reason: r.reason, disabledAt: r.at }));
}

/**
 * Failures of one hunt with `errorCode` in the last `windowSeconds` (server
 * clock) and after its newest disabled_at (so failures before an `enable` do
 * not count again). Sharp edge: hunt_run is a ReplacingMergeTree keyed by
 * (hunt_id, fire), so a background merge may fold repeated failures of ONE fire
 * into one row; rows are counted without FINAL, so a merge can only delay a
 * disable, never cause one.
 */
export async function countFailures(
  client: ClickHouseClient,
  database: string,
  settings: CoordinationSettings,
  huntId: string,
  errorCode: number,
  windowSeconds: number,
): Promise<number> {
  const run = qualifiedTable(database, TABLES.run);
  const state = qualifiedTable(database, TABLES.state);
  const rs = await client.query({
    query: `SELECT count() AS n FROM ${run}
      WHERE hunt_id = {hunt:String} AND status = 'failed' AND error_code = {code:Int32}
        AND updated >= now64(3) - toIntervalSecond({window:Int64})
        AND updated > (SELECT max(at) FROM (SELECT argMax(disabled_at, updated) AS at FROM ${state} WHERE hunt_id = {hunt:String}))`,
    query_params: { hunt: huntId, code: errorCode, window: windowSeconds },
    format: 'JSONEachRow',
    clickhouse_settings: settings.read,
  });
  const [row] = await rs.json<{ n: number | string }>();
  return Number(row?.n ?? 0);
}
